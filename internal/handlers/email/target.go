package email

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	mail "github.com/wneessen/go-mail"

	"github.com/pgrelay/pgrelay/internal/secret"
)

// Target is one SMTP server to send through, parsed from a URL:
//
//	smtp://[user[:password]@]host[:port][?options]    port 587; STARTTLS when offered
//	smtps://[user[:password]@]host[:port][?options]   port 465; implicit TLS
//
// Options (query parameters):
//
//	tls=opportunistic|mandatory|none   STARTTLS policy of smtp:// (default opportunistic;
//	                                   mandatory when the URL has a user and the host
//	                                   is not loopback)
//	auth=auto|plain|login|cram-md5|none
//	                                   SMTP AUTH mechanism (default auto with a user, else none)
//	insecure_skip_verify=true          do not verify the server's certificate (tests only)
//	timeout=30s                        dial and per-message command timeout
//	pool=4                             most connections kept open to this server
//	idle=60s                           an idle connection older than this is not reused
//	helo=name                          EHLO name (default: the host name)
//
// A Target never prints its credentials: String shows scheme, host and port.
type Target struct {
	Scheme             string
	Host               string
	Port               int
	Username           string
	password           string
	TLSPolicy          mail.TLSPolicy
	ImplicitTLS        bool
	Auth               mail.SMTPAuthType
	InsecureSkipVerify bool
	Timeout            time.Duration
	PoolSize           int
	IdleTimeout        time.Duration
	HELO               string
	key                string // the URL as given: identifies the target, never printed
}

// ErrInvalidTarget is wrapped by every error ParseTarget returns.
var ErrInvalidTarget = errors.New("email: invalid SMTP URL")

// ParseTarget parses an SMTP URL. Its errors never contain the password:
// they name the URL by secret.URL.
func ParseTarget(raw string) (*Target, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("%w %s: %s", ErrInvalidTarget, secret.URL(raw), fmt.Sprintf(format, args...))
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url's errors quote the whole URL, password included: not shown.
		return nil, fail("not a URL")
	}
	t := &Target{Scheme: strings.ToLower(u.Scheme), key: raw, Timeout: 30 * time.Second, PoolSize: 4,
		IdleTimeout: 60 * time.Second, TLSPolicy: mail.TLSOpportunistic}
	switch t.Scheme {
	case "smtp":
		t.Port = 587
	case "smtps":
		t.Port, t.ImplicitTLS = 465, true
	default:
		return nil, fail("the scheme must be smtp or smtps")
	}
	t.Host = u.Hostname()
	if t.Host == "" {
		return nil, fail("no host")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, fail("port %q is not 1-65535", p)
		}
		t.Port = n
	}
	if u.Path != "" && u.Path != "/" {
		return nil, fail("unexpected path %q", u.Path)
	}
	if u.User != nil {
		t.Username = u.User.Username()
		t.password, _ = u.User.Password()
	}
	t.Auth = mail.SMTPAuthNoAuth
	if t.Username != "" {
		t.Auth = mail.SMTPAuthAutoDiscover
	}
	tlsGiven := false
	for k, vs := range u.Query() {
		v := ""
		if len(vs) > 0 {
			v = vs[len(vs)-1]
		}
		switch k {
		case "tls":
			tlsGiven = true
			switch strings.ToLower(v) {
			case "opportunistic":
				t.TLSPolicy = mail.TLSOpportunistic
			case "mandatory", "starttls":
				t.TLSPolicy = mail.TLSMandatory
			case "none", "off":
				t.TLSPolicy = mail.NoTLS
			default:
				return nil, fail("tls=%q: expected opportunistic, mandatory or none", v)
			}
		case "auth":
			switch strings.ToLower(v) {
			case "auto":
				t.Auth = mail.SMTPAuthAutoDiscover
			case "plain":
				t.Auth = mail.SMTPAuthPlain
			case "login":
				t.Auth = mail.SMTPAuthLogin
			case "cram-md5":
				t.Auth = mail.SMTPAuthCramMD5
			case "none":
				t.Auth = mail.SMTPAuthNoAuth
			default:
				return nil, fail("auth=%q: expected auto, plain, login, cram-md5 or none", v)
			}
		case "insecure_skip_verify":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, fail("insecure_skip_verify=%q: expected true or false", v)
			}
			t.InsecureSkipVerify = b
		case "timeout", "idle":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fail("%s=%q: expected a positive duration such as 30s", k, v)
			}
			if k == "timeout" {
				t.Timeout = d
			} else {
				t.IdleTimeout = d
			}
		case "pool":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 1000 {
				return nil, fail("pool=%q: expected 1-1000", v)
			}
			t.PoolSize = n
		case "helo":
			if v == "" || strings.ContainsAny(v, " \r\n") {
				return nil, fail("helo=%q: expected a host name", v)
			}
			t.HELO = v
		default:
			return nil, fail("unknown option %q", k)
		}
	}
	if t.Auth != mail.SMTPAuthNoAuth && t.Username == "" {
		return nil, fail("auth=%s needs a user name in the URL", strings.ToLower(string(t.Auth)))
	}
	// Credentials never travel in clear by default: a network attacker who
	// strips the server's STARTTLS offer must get a refused send, not the
	// password. Loopback (a local relay) and an explicit tls= are left as
	// they are.
	if t.Username != "" && !t.ImplicitTLS && !tlsGiven && !isLoopback(t.Host) {
		t.TLSPolicy = mail.TLSMandatory
	}
	return t, nil
}

// isLoopback tells whether host is localhost or a loopback address.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Addr is host:port.
func (t *Target) Addr() string { return net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) }

// String names the target without credentials: scheme://host:port.
func (t *Target) String() string { return t.Scheme + "://" + t.Addr() }
