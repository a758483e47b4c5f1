package devenv

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"mime"
	"mime/multipart"
	"mime/quotedprintable"
	"net"
	"net/mail"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"
)

// SMTPConfig configures an SMTP catcher. Zero values mean defaults.
type SMTPConfig struct {
	// Addr to listen on (default 127.0.0.1:0, a free port).
	Addr string
	// Username and Password, when set, make AUTH mandatory (PLAIN, LOGIN and
	// CRAM-MD5 are offered).
	Username, Password string
	// TLS, when set, offers STARTTLS, or serves implicit TLS with ImplicitTLS.
	TLS         *tls.Config
	ImplicitTLS bool
	// LoginChallenge, when set, is sent after the password of an AUTH LOGIN
	// as one more challenge, instead of accepting it: a server whose
	// exchange goes wrong, whose client gives up quoting the challenge in its
	// error. It may hold any bytes (not UTF-8, NUL).
	LoginChallenge []byte
	// DataDelay is slept in every DATA before it is accepted: it widens the
	// window in which two transactions of one sender could overlap, or
	// outlasts a client's timeout. SetDataDelay changes it later.
	DataDelay time.Duration
	// Logger receives the server's own errors (default: discard).
	Logger *slog.Logger
	// SaveDir, when set, is where the catcher keeps every message it
	// accepts, as <time>-<n>.eml (the bytes as received, mode 0600; <time>
	// in UTC, <n> the message's number in this catcher): created (mode 0700)
	// when missing. A message it cannot write there is refused with a 451,
	// for the sender to retry. Saved lists the last ones, those an earlier
	// catcher kept there included. Without it nothing is written.
	SaveDir string
}

// SavedMessage is one message kept in SMTPConfig.SaveDir: its file and the
// header fields that tell it apart (empty when the file has no header).
type SavedMessage struct {
	File    string
	From    string
	To      string
	Subject string // decoded
}

// savedKept is how many SavedMessage the catcher keeps in memory for Saved.
const savedKept = 100

// SMTP is an in-process SMTP server that accepts every message and records
// it, with the sessions that carried them and any two mail transactions of
// one sender (MAIL FROM) in progress at once. It can be stopped and started
// again on the same port, and told to refuse the recipients of a domain.
type SMTP struct {
	cfg  SMTPConfig
	addr string

	mu        sync.Mutex
	dataDelay time.Duration
	srv       *smtp.Server
	done      chan struct{}
	messages  []Message
	sessions  int
	active    map[string]int // sender -> transactions in progress
	maxActive map[string]int
	overlaps  int
	reject    map[string]rejectRule // domain -> rule
	saved     []SavedMessage        // the last savedKept messages in cfg.SaveDir
	saveSeq   int                   // messages given a file name in cfg.SaveDir
}

type rejectRule struct {
	code int
	text string
}

// Message is one message the catcher accepted.
type Message struct {
	// Session is the number of the SMTP session (connection) that carried it.
	Session int
	// From and To are the envelope (MAIL FROM, RCPT TO).
	From string
	To   []string
	// Data is the message as received; Header its parsed header.
	Data   []byte
	Header mail.Header
	At     time.Time
	// TLS: the session was encrypted (STARTTLS or implicit TLS).
	TLS bool
	// AuthUser is the user the session authenticated as ("" without AUTH).
	AuthUser string
	// AuthMech is the SASL mechanism of that AUTH: "PLAIN", "LOGIN" or
	// "CRAM-MD5" ("" without AUTH).
	AuthMech string
}

// Subject is the decoded Subject header.
func (m Message) Subject() string {
	var d mime.WordDecoder
	s, err := d.DecodeHeader(m.Header.Get("Subject"))
	if err != nil {
		return m.Header.Get("Subject")
	}
	return s
}

// MessageID is the Message-ID header.
func (m Message) MessageID() string { return m.Header.Get("Message-Id") }

// Bodies returns the decoded text/plain and text/html parts (html empty when
// there is none).
func (m Message) Bodies() (text, html string, err error) {
	msg, err := mail.ReadMessage(bytes.NewReader(m.Data))
	if err != nil {
		return "", "", err
	}
	err = walkParts(msg.Header.Get("Content-Type"), msg.Header.Get("Content-Transfer-Encoding"), msg.Body,
		func(ct, body string) {
			switch ct {
			case "text/plain":
				text = body
			case "text/html":
				html = body
			}
		})
	return text, html, err
}

func walkParts(contentType, cte string, r io.Reader, f func(ct, body string)) error {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		mt = "text/plain"
	}
	if strings.HasPrefix(mt, "multipart/") {
		mr := multipart.NewReader(r, params["boundary"])
		for {
			p, err := mr.NextRawPart()
			if errors.Is(err, io.EOF) {
				return nil
			}
			if err != nil {
				return err
			}
			if err := walkParts(p.Header.Get("Content-Type"), p.Header.Get("Content-Transfer-Encoding"), p, f); err != nil {
				return err
			}
		}
	}
	switch strings.ToLower(cte) {
	case "quoted-printable":
		r = quotedprintable.NewReader(r)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if strings.EqualFold(cte, "base64") {
		if b, err = base64.StdEncoding.DecodeString(strings.Join(strings.Fields(string(b)), "")); err != nil {
			return err
		}
	}
	f(mt, strings.ReplaceAll(string(b), "\r\n", "\n"))
	return nil
}

// StartSMTP starts a catcher.
func StartSMTP(cfg SMTPConfig) (*SMTP, error) {
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &SMTP{cfg: cfg, addr: cfg.Addr, dataDelay: cfg.DataDelay, active: map[string]int{},
		maxActive: map[string]int{}, reject: map[string]rejectRule{}}
	if cfg.SaveDir != "" {
		saved, err := loadSaved(cfg.SaveDir)
		if err != nil {
			return nil, err
		}
		s.saved = saved
	}
	if err := s.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// Start starts a stopped catcher again on the same address.
func (s *SMTP) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.srv != nil {
		return nil
	}
	var ln net.Listener
	var err error
	// The port may still be held for a moment by the sockets just closed.
	for i := 0; ; i++ {
		ln, err = net.Listen("tcp", s.addr)
		if err == nil || i == 50 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("devenv: smtp listen on %s: %w", s.addr, err)
	}
	s.addr = ln.Addr().String()
	if s.cfg.ImplicitTLS {
		if s.cfg.TLS == nil {
			_ = ln.Close()
			return errors.New("devenv: smtp: ImplicitTLS needs TLS")
		}
		ln = tls.NewListener(ln, s.cfg.TLS)
	}
	srv := smtp.NewServer(&smtpBackend{s: s})
	srv.Domain = "pgrelay-catcher.localhost"
	srv.MaxMessageBytes = 16 << 20
	srv.MaxRecipients = 1000
	srv.ReadTimeout = 2 * time.Minute
	srv.WriteTimeout = 30 * time.Second
	srv.AllowInsecureAuth = true
	srv.ErrorLog = slogPrinter{s.cfg.Logger}
	if !s.cfg.ImplicitTLS {
		srv.TLSConfig = s.cfg.TLS
	}
	done := make(chan struct{})
	s.srv, s.done = srv, done
	go func() {
		defer close(done)
		_ = srv.Serve(ln)
	}()
	return nil
}

// Stop closes the listener and every session (clients see their
// connections drop); what was recorded is kept.
func (s *SMTP) Stop() error {
	s.mu.Lock()
	srv, done := s.srv, s.done
	s.srv = nil
	s.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := srv.Close() // closes every session: their Logout ends open transactions
	<-done
	if errors.Is(err, net.ErrClosed) {
		err = nil
	}
	return err
}

// Close stops the catcher for good.
func (s *SMTP) Close() error { return s.Stop() }

// Addr is host:port.
func (s *SMTP) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.addr
}

// URL is the smtp:// (or smtps://) URL of the catcher, with its credentials
// and auth=plain when it requires them; TLS is not verified.
func (s *SMTP) URL() string {
	u := url.URL{Scheme: "smtp", Host: s.Addr()}
	q := url.Values{}
	if s.cfg.ImplicitTLS {
		u.Scheme = "smtps"
	}
	if s.cfg.TLS != nil {
		q.Set("insecure_skip_verify", "true")
	}
	if s.cfg.Username != "" {
		u.User = url.UserPassword(s.cfg.Username, s.cfg.Password)
		q.Set("auth", "plain")
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// RejectDomain makes RCPT TO of any address @domain fail with code (a 4xx
// or 5xx) and text; code 0 accepts the domain again.
func (s *SMTP) RejectDomain(domain string, code int, text string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if code == 0 {
		delete(s.reject, strings.ToLower(domain))
		return
	}
	s.reject[strings.ToLower(domain)] = rejectRule{code: code, text: text}
}

// SetDataDelay changes the delay of every DATA from now on (see
// SMTPConfig.DataDelay); a DATA already waiting keeps its delay.
func (s *SMTP) SetDataDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dataDelay = d
}

// Messages returns a copy of what was received, in order.
func (s *SMTP) Messages() []Message {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Message(nil), s.messages...)
}

// Count is the number of messages received.
func (s *SMTP) Count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.messages)
}

// Last returns the last message received.
func (s *SMTP) Last() (Message, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.messages) == 0 {
		return Message{}, false
	}
	return s.messages[len(s.messages)-1], true
}

// Saved returns the last n (at most 100) messages kept in SMTPConfig.SaveDir,
// oldest first: this catcher's and those kept there before it started. It is
// empty without SaveDir.
func (s *SMTP) Saved(n int) []SavedMessage {
	s.mu.Lock()
	defer s.mu.Unlock()
	n = min(max(n, 0), len(s.saved))
	return append([]SavedMessage(nil), s.saved[len(s.saved)-n:]...)
}

// loadSaved reads the header fields of the last savedKept messages in dir
// (created when missing), oldest first.
func loadSaved(dir string) ([]SavedMessage, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("devenv: smtp: make %s: %w", dir, err)
	}
	entries, err := os.ReadDir(dir) // sorted by name: by time
	if err != nil {
		return nil, fmt.Errorf("devenv: smtp: list %s: %w", dir, err)
	}
	var names []string
	for _, e := range entries {
		if e.Type().IsRegular() && strings.HasSuffix(e.Name(), ".eml") && !strings.HasPrefix(e.Name(), ".") {
			names = append(names, e.Name())
		}
	}
	names = names[len(names)-min(len(names), savedKept):]
	out := make([]SavedMessage, 0, len(names))
	for _, n := range names {
		path := filepath.Join(dir, n)
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("devenv: smtp: read %s: %w", path, err)
		}
		out = append(out, savedMessage(path, b))
	}
	return out, nil
}

// savedMessage is the SavedMessage of the message data kept in path.
func savedMessage(path string, data []byte) SavedMessage {
	sm := SavedMessage{File: path}
	m, err := mail.ReadMessage(bytes.NewReader(data))
	if err != nil {
		return sm
	}
	msg := Message{Header: m.Header}
	sm.From, sm.To, sm.Subject = m.Header.Get("From"), m.Header.Get("To"), msg.Subject()
	return sm
}

// save writes data to the catcher's SaveDir as message number n: to a
// temporary file first, renamed once complete, so that a reader of the
// directory never sees part of a message.
func (s *SMTP) save(n int, at time.Time, data []byte) (SavedMessage, error) {
	dir := s.cfg.SaveDir
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.eml", at.UTC().Format("20060102T150405.000000000Z"), n))
	f, err := os.CreateTemp(dir, ".part-*")
	if err != nil {
		return SavedMessage{}, fmt.Errorf("devenv: smtp: save message %d: %w", n, err)
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		_ = os.Remove(f.Name())
		return SavedMessage{}, fmt.Errorf("devenv: smtp: save message %d as %s: %w", n, path, err)
	}
	return savedMessage(path, data), nil
}

// Sessions is the number of SMTP sessions (connections greeted) so far.
func (s *SMTP) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions
}

// Overlaps is how often a mail transaction started while another of the same
// sender was in progress in another session.
func (s *SMTP) Overlaps() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.overlaps
}

// MaxConcurrent is the most mail transactions of sender (the envelope
// address) seen in progress at once.
func (s *SMTP) MaxConcurrent(sender string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxActive[strings.ToLower(sender)]
}

// SelfSignedTLS returns a server TLS configuration with a fresh self-signed
// certificate for 127.0.0.1 and localhost.
func SelfSignedTLS() (*tls.Config, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "pgrelay test"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:     []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}},
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// --- go-smtp backend -------------------------------------------------------

type smtpBackend struct{ s *SMTP }

func (b *smtpBackend) NewSession(c *smtp.Conn) (smtp.Session, error) {
	s := b.s
	s.mu.Lock()
	s.sessions++
	n := s.sessions
	s.mu.Unlock()
	return &smtpSession{s: s, c: c, id: n, authed: s.cfg.Username == ""}, nil
}

type smtpSession struct {
	s      *SMTP
	c      *smtp.Conn
	id     int
	authed bool
	user   string
	mech   string
	from   string
	inTx   bool
	rcpts  []string
}

func (x *smtpSession) AuthMechanisms() []string {
	if x.s.cfg.Username == "" {
		return nil
	}
	return []string{sasl.Plain, sasl.Login, "CRAM-MD5"}
}

func (x *smtpSession) Auth(mech string) (sasl.Server, error) {
	check := func(user, pass string) error {
		if user != x.s.cfg.Username || pass != x.s.cfg.Password {
			return smtp.ErrAuthFailed
		}
		x.authed, x.user, x.mech = true, user, mech
		return nil
	}
	switch mech {
	case sasl.Plain:
		return sasl.NewPlainServer(func(_, user, pass string) error { return check(user, pass) }), nil
	case sasl.Login:
		return &loginServer{check: check, extra: x.s.cfg.LoginChallenge}, nil
	case "CRAM-MD5":
		return &cramServer{s: x.s, done: func() { x.authed, x.user, x.mech = true, x.s.cfg.Username, mech }}, nil
	}
	return nil, smtp.ErrAuthUnknownMechanism
}

func (x *smtpSession) Mail(from string, _ *smtp.MailOptions) error {
	if !x.authed {
		return smtp.ErrAuthRequired
	}
	x.endTx()
	s := x.s
	s.mu.Lock()
	// Session fields the transaction bookkeeping uses are guarded by s.mu:
	// Logout comes from another goroutine when the server closes.
	x.from = strings.ToLower(from)
	x.inTx = true
	s.active[x.from]++
	if s.active[x.from] > 1 {
		s.overlaps++
	}
	s.maxActive[x.from] = max(s.maxActive[x.from], s.active[x.from])
	s.mu.Unlock()
	return nil
}

func (x *smtpSession) Rcpt(to string, _ *smtp.RcptOptions) error {
	s := x.s
	s.mu.Lock()
	rule, ok := s.reject[strings.ToLower(to[strings.LastIndexByte(to, '@')+1:])]
	s.mu.Unlock()
	if ok {
		first := rule.code / 100
		return &smtp.SMTPError{Code: rule.code, EnhancedCode: smtp.EnhancedCode{first, 1, 1}, Message: rule.text}
	}
	x.rcpts = append(x.rcpts, to)
	return nil
}

func (x *smtpSession) Data(r io.Reader) error {
	// The transaction ends before the reply goes out: once the client reads
	// 250 it may start the next one anywhere.
	defer x.endTx()
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	x.s.mu.Lock()
	delay, stopped := x.s.dataDelay, x.s.done
	x.s.mu.Unlock()
	if delay > 0 {
		// Stop ends the wait: no session outlives the catcher.
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-stopped:
			t.Stop()
			return errors.New("devenv: smtp catcher stopped")
		}
	}
	_, isTLS := x.c.TLSConnectionState()
	x.s.mu.Lock()
	from := x.from
	x.s.mu.Unlock()
	msg := Message{Session: x.id, From: from, To: append([]string(nil), x.rcpts...), Data: b, At: time.Now(),
		TLS: isTLS, AuthUser: x.user, AuthMech: x.mech}
	if m, err := mail.ReadMessage(bytes.NewReader(b)); err == nil {
		msg.Header = m.Header
	}
	s := x.s
	if s.cfg.SaveDir == "" {
		s.mu.Lock()
		s.messages = append(s.messages, msg)
		s.mu.Unlock()
		return nil
	}
	// Only a message kept is accepted: its number is taken first, and
	// recorded once its file is complete.
	s.mu.Lock()
	s.saveSeq++
	n := s.saveSeq
	s.mu.Unlock()
	sm, err := s.save(n, msg.At, b)
	if err != nil {
		s.cfg.Logger.Error("smtp catcher: cannot keep a message", "err", err)
		return &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "cannot keep the message, try again later"}
	}
	s.mu.Lock()
	s.messages = append(s.messages, msg)
	s.saved = append(s.saved, sm)
	if len(s.saved) > savedKept {
		s.saved = append(s.saved[:0], s.saved[len(s.saved)-savedKept:]...)
	}
	s.mu.Unlock()
	return nil
}

func (x *smtpSession) endTx() {
	s := x.s
	s.mu.Lock()
	defer s.mu.Unlock()
	if !x.inTx {
		return
	}
	x.inTx = false
	if s.active[x.from] > 0 {
		s.active[x.from]--
	}
}

func (x *smtpSession) Reset() {
	x.endTx()
	x.rcpts = nil
}

func (x *smtpSession) Logout() error {
	x.endTx()
	return nil
}

// loginServer is the server side of AUTH LOGIN (go-sasl has only the client).
type loginServer struct {
	check func(user, pass string) error
	user  string
	step  int
	extra []byte // a challenge after the password (SMTPConfig.LoginChallenge)
}

func (l *loginServer) Next(response []byte) ([]byte, bool, error) {
	switch l.step {
	case 0:
		l.step++
		if len(response) > 0 { // initial response: the user name
			l.user = string(response)
			l.step++
			return []byte("Password:"), false, nil
		}
		return []byte("Username:"), false, nil
	case 1:
		l.user = string(response)
		l.step++
		return []byte("Password:"), false, nil
	case 2:
		if l.extra != nil {
			l.step++
			return l.extra, false, nil
		}
		return nil, true, l.check(l.user, string(response))
	default:
		return nil, true, smtp.ErrAuthFailed
	}
}

// cramServer is the server side of AUTH CRAM-MD5 (RFC 2195).
type cramServer struct {
	s         *SMTP
	done      func()
	challenge string
}

func (c *cramServer) Next(response []byte) ([]byte, bool, error) {
	if c.challenge == "" {
		c.challenge = "<" + strconv.FormatInt(time.Now().UnixNano(), 10) + "@pgrelay-catcher>"
		return []byte(c.challenge), false, nil
	}
	user, digest, ok := strings.Cut(string(response), " ")
	mac := hmac.New(md5.New, []byte(c.s.cfg.Password))
	mac.Write([]byte(c.challenge))
	want := hex.EncodeToString(mac.Sum(nil))
	if !ok || user != c.s.cfg.Username || !hmac.Equal([]byte(digest), []byte(want)) {
		return nil, true, smtp.ErrAuthFailed
	}
	c.done()
	return nil, true, nil
}

type slogPrinter struct{ l *slog.Logger }

func (p slogPrinter) Printf(format string, v ...any) { p.l.Debug(fmt.Sprintf(format, v...)) }
func (p slogPrinter) Println(v ...any)               { p.l.Debug(fmt.Sprintln(v...)) }
