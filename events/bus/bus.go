// Package bus is pgrelay's connection to NATS: connecting (and reconnecting
// for ever), the events stream on JetStream, batched publishing with
// acknowledgements, and the single publishes of the nats handler kind. It is
// the only package that talks to NATS; what is published (subjects and JSON)
// is package events'.
package bus

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/secret"
)

// Errors callers branch on.
var (
	// ErrNotConnected: NATS is not reachable right now (the connection keeps
	// retrying in the background).
	ErrNotConnected = errors.New("bus: not connected to NATS")
	// ErrTooLarge: the message exceeds the server's max payload; sending it
	// again cannot succeed.
	ErrTooLarge = errors.New("bus: message larger than the NATS server's max payload")
	// ErrStreamConfig: the events stream exists with a configuration pgrelay
	// cannot publish to or reconcile.
	ErrStreamConfig = errors.New("bus: events stream configuration conflict")
)

// Options configures a connection. Only URL is required.
type Options struct {
	// URL is the NATS server URL, or a comma-separated list of them.
	URL string
	// CredsFile is a NATS credentials file (JWT and NKey seed).
	CredsFile string
	// TLSCert and TLSKey are a client certificate and its key (both or none).
	TLSCert, TLSKey string
	// TLSCA is a CA bundle to verify the server with.
	TLSCA string
	// Name is the client name the server shows (default "pgrelay").
	Name string
	// ReconnectWait is the pause between reconnect attempts (default 500ms).
	ReconnectWait time.Duration
	// ReconnectJitter is the most added at random to ReconnectWait: up to
	// this on plain connections, up to twice this (at least a second) on
	// TLS ones (default 100ms).
	ReconnectJitter time.Duration
	// Logger receives connection state changes (default: discard).
	Logger *slog.Logger
}

// Conn is a NATS connection that never gives up: an unreachable server at
// start or later is retried for ever in the background, while publishes fail
// fast with ErrNotConnected (nothing is buffered: pgrelay's durable truth is
// in PostgreSQL, and a message buffered during an outage could not be
// acknowledged).
type Conn struct {
	nc  *nats.Conn
	js  jetstream.JetStream
	log *slog.Logger
	gen atomic.Uint64

	mu      sync.Mutex
	routes  map[string]route
	connErr string // the last connection failure logged, "" once connected
}

// route caches where the nats handler publishes a subject.
type route struct {
	stream string // "" for core NATS
	until  time.Time
}

// routeTTL is how long a subject's stream lookup is trusted: streams change
// rarely, and a stale entry only costs one failed attempt.
const routeTTL = 10 * time.Second

// Connect connects to NATS. It fails only on invalid options: an unreachable
// server is retried in the background (Connected reports false until then).
func Connect(o Options) (*Conn, error) {
	if strings.TrimSpace(o.URL) == "" {
		return nil, errors.New("bus: a NATS URL is required")
	}
	if (o.TLSCert == "") != (o.TLSKey == "") {
		return nil, errors.New("bus: a TLS client certificate needs its key and the key its certificate")
	}
	if o.Name == "" {
		o.Name = "pgrelay"
	}
	if o.ReconnectWait <= 0 {
		o.ReconnectWait = 500 * time.Millisecond
	}
	if o.ReconnectJitter <= 0 {
		o.ReconnectJitter = 100 * time.Millisecond
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Conn{log: o.Logger, routes: map[string]route{}}
	opts := []nats.Option{
		nats.Name(o.Name),
		nats.MaxReconnects(-1),
		nats.RetryOnFailedConnect(true),
		nats.ReconnectWait(o.ReconnectWait),
		nats.ReconnectJitter(o.ReconnectJitter, max(2*o.ReconnectJitter, time.Second)),
		nats.ReconnectBufSize(-1), // fail fast while disconnected: see Conn
		nats.Timeout(5 * time.Second),
		// A server that refuses the credentials may accept them later (they
		// are fixed on its side): keep trying, as for any other failure.
		nats.IgnoreAuthErrorAbort(),
		nats.ReconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil && c.noteConnErr(err.Error()) {
				c.log.Warn("cannot connect to NATS; retrying", "err", err)
			}
		}),
		nats.ConnectHandler(func(nc *nats.Conn) {
			c.noteConnErr("")
			c.gen.Add(1)
			c.log.Info("connected to NATS", "url", nc.ConnectedUrlRedacted())
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.noteConnErr("")
			c.gen.Add(1)
			c.log.Info("reconnected to NATS", "url", nc.ConnectedUrlRedacted())
		}),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			c.gen.Add(1)
			if err != nil {
				c.log.Warn("disconnected from NATS; reconnecting", "err", err)
			}
		}),
		nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) {
			c.log.Warn("NATS error", "err", err)
		}),
	}
	if o.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(o.CredsFile))
	}
	if o.TLSCert != "" {
		opts = append(opts, nats.ClientCert(o.TLSCert, o.TLSKey))
	}
	if o.TLSCA != "" {
		opts = append(opts, nats.RootCAs(o.TLSCA))
	}
	nc, err := nats.Connect(o.URL, opts...)
	if err != nil {
		return nil, fmt.Errorf("bus: connect to %s: %w", secret.String(o.URL), err)
	}
	js, err := jetstream.New(nc,
		jetstream.WithPublishAsyncTimeout(10*time.Second),
		jetstream.WithPublishAsyncMaxPending(4096),
		jetstream.WithDefaultTimeout(5*time.Second))
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	c.nc, c.js = nc, js
	if nc.IsConnected() {
		c.gen.Add(1)
	}
	return c, nil
}

// noteConnErr records msg as the last connection failure and reports
// whether it differs from the one before: a failure that repeats at every
// attempt (wrong credentials, a certificate refused) is logged once. Numbers
// (the client's port changes at every attempt) do not count as a change.
func (c *Conn) noteConnErr(msg string) bool {
	msg = digits.ReplaceAllString(msg, "#")
	c.mu.Lock()
	defer c.mu.Unlock()
	changed := msg != c.connErr
	c.connErr = msg
	return changed
}

var digits = regexp.MustCompile(`[0-9]+`)

// Close closes the connection.
func (c *Conn) Close() error {
	c.nc.Close()
	return nil
}

// Connected reports whether the connection is up now.
func (c *Conn) Connected() bool { return c.nc.IsConnected() }

// Generation changes whenever the connection goes down or comes up: a
// caller that set something up on the server (the stream) does it again
// when the generation it did it in is gone.
func (c *Conn) Generation() uint64 { return c.gen.Load() }

// MaxPayload is the server's max payload in bytes (0 before the first
// connection).
func (c *Conn) MaxPayload() int {
	if !c.nc.IsConnected() {
		return 0
	}
	return int(c.nc.MaxPayload())
}

// NATS is the underlying connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// JetStream is the JetStream context of the connection.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// JetStreamEnabled reports whether the server (and account) has JetStream.
func (c *Conn) JetStreamEnabled(ctx context.Context) (bool, error) {
	if !c.nc.IsConnected() {
		return false, ErrNotConnected
	}
	_, err := c.js.AccountInfo(ctx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false, nil
	}
	return false, fmt.Errorf("bus: ask for JetStream: %w", err)
}

// StreamConfig is what pgrelay asks of the events stream.
type StreamConfig struct {
	// Name of the stream (default DefaultStream).
	Name string
	// MaxAge: messages older than this are removed. 0 when creating means
	// DefaultMaxAge; 0 for an existing stream leaves its max age as it is.
	MaxAge time.Duration
	// Retention is RetentionLimits or RetentionInterest. "" when creating
	// means limits; "" for an existing stream leaves its policy as it is.
	Retention string
	// MaxBytes: the oldest messages are removed to keep the stream within
	// this size. 0 when creating means no limit; 0 for an existing stream
	// leaves its limit as it is.
	MaxBytes int64
}

// Retention policies of the events stream. Work-queue retention is not
// offered: it allows one consumer per subject and removes a message once it
// is acknowledged, while events are for any number of consumers.
const (
	// RetentionLimits keeps messages until max age or max bytes removes them.
	RetentionLimits = "limits"
	// RetentionInterest removes a message once every consumer that existed
	// when it was stored has acknowledged it (at once when there is none).
	RetentionInterest = "interest"
)

// retentionPolicy maps a Retention name to JetStream's policy.
func retentionPolicy(name string) (jetstream.RetentionPolicy, error) {
	switch name {
	case "", RetentionLimits:
		return jetstream.LimitsPolicy, nil
	case RetentionInterest:
		return jetstream.InterestPolicy, nil
	}
	return 0, fmt.Errorf("bus: stream retention %q: expected %s or %s", name, RetentionLimits, RetentionInterest)
}

// Defaults of the events stream.
const (
	DefaultStream = "PGRELAY_EVENTS"
	DefaultMaxAge = 7 * 24 * time.Hour
	// DuplicateWindow is the stream's de-duplication window: a message
	// published again with the same Nats-Msg-Id within it is dropped. It
	// covers replays after a short outage or a restart (the publisher
	// republishes what it could not see acknowledged; after a longer outage
	// it reads the stream for them first: StoredIDs).
	DuplicateWindow = 2 * time.Minute
)

// EnsureStream creates the events stream, or reconciles an existing one:
// subjects pgrelay.> are added when the stream does not capture them (its
// narrower pgrelay.* subjects are replaced) and MaxAge, Retention and
// MaxBytes are applied when set;
// everything else (storage, replicas, limits) is left as the operator set
// it. A stream pgrelay cannot publish to (sealed, a mirror, no acks) or a
// change the server refuses (another stream captures pgrelay.>) is an
// ErrStreamConfig error saying what to fix. It returns what it did:
// "created", "updated" or "ok".
func (c *Conn) EnsureStream(ctx context.Context, cfg StreamConfig) (string, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultStream
	}
	retention, err := retentionPolicy(cfg.Retention)
	if err != nil {
		return "", err
	}
	if cfg.MaxBytes < 0 {
		return "", fmt.Errorf("bus: stream max bytes %d must not be negative", cfg.MaxBytes)
	}
	s, err := c.js.Stream(ctx, cfg.Name)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		age := cfg.MaxAge
		if age <= 0 {
			age = DefaultMaxAge
		}
		maxBytes := cfg.MaxBytes
		if maxBytes == 0 {
			maxBytes = -1 // no limit
		}
		_, err = c.js.CreateStream(ctx, jetstream.StreamConfig{
			Name:        cfg.Name,
			Description: "pgrelay status events (docs/events.md)",
			Subjects:    []string{events.StreamSubjects},
			Retention:   retention,
			Storage:     jetstream.FileStorage,
			MaxAge:      age,
			MaxBytes:    maxBytes,
			Duplicates:  min(DuplicateWindow, age),
		})
		if err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNameInUse {
				return "", err // created concurrently: try again
			}
			return "", fmt.Errorf("%w: create stream %s with subjects %s: %w", ErrStreamConfig, cfg.Name,
				events.StreamSubjects, err)
		}
		return "created", nil
	}
	if err != nil {
		return "", fmt.Errorf("bus: look up stream %s: %w", cfg.Name, err)
	}
	conf := s.CachedInfo().Config
	switch {
	case conf.Sealed:
		return "", fmt.Errorf("%w: stream %s is sealed (it accepts no messages): delete it or set another --nats-stream", ErrStreamConfig, cfg.Name)
	case conf.Mirror != nil:
		return "", fmt.Errorf("%w: stream %s is a mirror (it accepts no published messages): delete it or set another --nats-stream", ErrStreamConfig, cfg.Name)
	case conf.NoAck:
		return "", fmt.Errorf("%w: stream %s has no_ack set; pgrelay needs acknowledged publishes: clear it or set another --nats-stream", ErrStreamConfig, cfg.Name)
	}
	changed := false
	if !slicesContainsAny(conf.Subjects, events.StreamSubjects, ">") {
		keep := conf.Subjects[:0:0]
		for _, sub := range conf.Subjects {
			if !strings.HasPrefix(sub, events.SubjectRoot+".") {
				keep = append(keep, sub)
			}
		}
		conf.Subjects = append(keep, events.StreamSubjects)
		changed = true
	}
	if cfg.MaxAge > 0 && conf.MaxAge != cfg.MaxAge {
		conf.MaxAge = cfg.MaxAge
		if conf.Duplicates > cfg.MaxAge {
			conf.Duplicates = cfg.MaxAge
		}
		changed = true
	}
	if cfg.Retention != "" && conf.Retention != retention {
		if conf.Retention == jetstream.WorkQueuePolicy {
			return "", fmt.Errorf("%w: stream %s has work-queue retention, which the server cannot change and "+
				"which allows one consumer per subject: delete it or set another --nats-stream", ErrStreamConfig, cfg.Name)
		}
		conf.Retention = retention
		changed = true
	}
	if cfg.MaxBytes > 0 && conf.MaxBytes != cfg.MaxBytes {
		conf.MaxBytes = cfg.MaxBytes
		changed = true
	}
	if !changed {
		return "ok", nil
	}
	if _, err := c.js.UpdateStream(ctx, conf); err != nil {
		return "", fmt.Errorf("%w: update stream %s (subjects %v, max age %s, retention %s, max bytes %d): %w",
			ErrStreamConfig, cfg.Name, conf.Subjects, conf.MaxAge, conf.Retention, conf.MaxBytes, err)
	}
	return "updated", nil
}

func slicesContainsAny(s []string, vs ...string) bool {
	for _, x := range s {
		for _, v := range vs {
			if x == v {
				return true
			}
		}
	}
	return false
}

// Msg is one message of a batch.
type Msg struct {
	Subject string
	Data    []byte
	// ID is the Nats-Msg-Id: JetStream drops a second message with the same
	// id within the stream's duplicate window.
	ID string
}

// BatchResult tells how a batch went.
type BatchResult struct {
	// Acked is how many messages from the start of the batch are known to be
	// stored (JetStream) or flushed to the server (core NATS).
	Acked int
	// Duplicates is how many of those the stream had already (a replay).
	Duplicates int
	// Sent is how many messages were handed to the server. Those past Acked
	// may be stored all the same (their acknowledgements were lost).
	Sent int
	// LastSeq is the stream sequence of the last acknowledged message (0
	// when none was, or on core NATS).
	LastSeq uint64
}

// PublishBatch publishes msgs in order. With stream set it publishes to
// JetStream, expecting that stream, and waits for every acknowledgement;
// with stream empty it publishes on core NATS and flushes. The result counts
// the messages from the start of the batch that made it; err tells why the
// rest did not.
func (c *Conn) PublishBatch(ctx context.Context, stream string, msgs []Msg) (BatchResult, error) {
	var res BatchResult
	if len(msgs) == 0 {
		return res, nil
	}
	if !c.nc.IsConnected() {
		return res, ErrNotConnected
	}
	if stream == "" {
		for _, m := range msgs {
			msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: nats.Header{}}
			msg.Header.Set(jetstream.MsgIDHeader, m.ID)
			if err := c.nc.PublishMsg(msg); err != nil {
				return res, c.wrap(err, m.Subject)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.nc.FlushWithContext(fctx); err != nil {
			return res, fmt.Errorf("bus: flush: %w", c.wrap(err, ""))
		}
		res.Acked = len(msgs)
		return res, nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var sendErr error
	for _, m := range msgs {
		f, err := c.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data},
			jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(stream))
		if err != nil {
			sendErr = c.wrap(err, m.Subject)
			break
		}
		futures = append(futures, f)
	}
	res.Sent = len(futures)
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			res.Acked++
			if ack.Duplicate {
				res.Duplicates++
			}
			res.LastSeq = max(res.LastSeq, ack.Sequence)
		case err := <-f.Err():
			return res, fmt.Errorf("bus: publish %s (message %d of %d): %w", msgs[i].Subject, i+1, len(msgs), c.wrap(err, ""))
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	return res, sendErr
}

// StreamState is what the publisher reads of its stream.
type StreamState struct {
	// LastSeq is the sequence of the stream's last message.
	LastSeq uint64
	// Duplicates is the stream's duplicate window.
	Duplicates time.Duration
	// Created is when the stream was created: a stream deleted and created
	// again under the same name has another.
	Created time.Time
}

// StreamState reads the state of stream from the server.
func (c *Conn) StreamState(ctx context.Context, stream string) (StreamState, error) {
	if !c.nc.IsConnected() {
		return StreamState{}, ErrNotConnected
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return StreamState{}, fmt.Errorf("bus: look up stream %s: %w", stream, c.wrap(err, ""))
	}
	info := s.CachedInfo()
	return StreamState{LastSeq: info.State.LastSeq, Duplicates: info.Config.Duplicates, Created: info.Created}, nil
}

// storedFetch is how many messages StoredIDs asks for at a time.
const storedFetch = 1000

// StoredIDs returns the Nats-Msg-Id of every message of stream on subjects
// filter stored after sequence after, up to the stream's last message when
// it is called (later messages are not waited for), that keep accepts (nil:
// all; the others are read but not held). It reads headers only, through a
// consumer of its own that it deletes, so the user needs permission to create
// and delete consumers on the stream and to fetch from them. It returns an
// error rather than a partial set: when ctx ends first, or when the server
// stops delivering before every message that matched was read.
func (c *Conn) StoredIDs(ctx context.Context, stream, filter string, after uint64, keep func(id string) bool) (map[string]bool, error) {
	return c.storedIDs(ctx, stream, filter, after, time.Time{}, keep)
}

// StoredIDsSince is StoredIDs from the messages stored at or after since
// (by the server's clock) on.
func (c *Conn) StoredIDsSince(ctx context.Context, stream, filter string, since time.Time, keep func(id string) bool) (map[string]bool, error) {
	return c.storedIDs(ctx, stream, filter, 0, since, keep)
}

// storedFetchWait is the longest wait for one fetch of StoredIDs.
const storedFetchWait = 5 * time.Second

func (c *Conn) storedIDs(ctx context.Context, stream, filter string, after uint64, since time.Time,
	keep func(string) bool) (map[string]bool, error) {
	ids := map[string]bool{}
	if !c.nc.IsConnected() {
		return nil, ErrNotConnected
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("bus: look up stream %s: %w", stream, c.wrap(err, ""))
	}
	last := s.CachedInfo().State.LastSeq
	if last <= after {
		return ids, nil
	}
	cc := jetstream.ConsumerConfig{
		AckPolicy:     jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   after + 1,
		FilterSubject: filter,
		HeadersOnly:   true,
		MemoryStorage: true,
		// Removed by the server should the delete below not get through.
		InactiveThreshold: time.Minute,
	}
	from := fmt.Sprintf("sequence %d", after+1)
	if !since.IsZero() {
		cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &since
		from = since.Format(time.RFC3339Nano)
	}
	cons, err := s.CreateConsumer(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("bus: read stream %s (%s) from %s: create a consumer: %w", stream, filter, from, c.wrap(err, ""))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	fail := func(read int, err error) error {
		return fmt.Errorf("bus: read stream %s (%s) from %s up to sequence %d (%d messages read): %w",
			stream, filter, from, last, read, err)
	}
	// What matched when the consumer was made, asked for exactly so that a
	// fetch ends when it arrived rather than at its max wait.
	remaining := cons.CachedInfo().NumPending
	read := 0
	for remaining > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fail(read, err)
		}
		fctx, cancel := context.WithTimeout(ctx, storedFetchWait)
		n, done, err := c.fetchIDs(fctx, cons, int(min(remaining, storedFetch)), last, ids, keep)
		cancel()
		read += n
		switch {
		case err != nil:
			return nil, fail(read, err)
		case done:
			return ids, nil
		case n == 0:
			// Neither the messages that matched nor an error: what was read
			// is not all there is.
			return nil, fail(read, fmt.Errorf("%d messages not delivered within %s", remaining, storedFetchWait))
		}
		remaining -= uint64(min(uint64(n), remaining))
	}
	return ids, nil
}

// fetchIDs fetches up to n messages of cons (until ctx ends) and adds the
// ids that keep accepts to ids. done reports the stream's message last (or
// a later one) reached.
func (c *Conn) fetchIDs(ctx context.Context, cons jetstream.Consumer, n int, last uint64, ids map[string]bool,
	keep func(string) bool) (got int, done bool, err error) {
	batch, err := cons.Fetch(n, jetstream.FetchContext(ctx))
	if err != nil {
		return 0, false, c.wrap(err, "")
	}
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		if err != nil {
			return got, false, err
		}
		if md.Sequence.Stream > last {
			done = true
			continue
		}
		if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" && (keep == nil || keep(id)) {
			ids[id] = true
		}
		if md.Sequence.Stream == last || md.NumPending == 0 {
			done = true
		}
	}
	if err := batch.Error(); err != nil && !done {
		// A fetch that timed out after some messages is followed by another;
		// one that brought none is a failure.
		timeout := errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
		if !timeout || got == 0 {
			return got, false, c.wrap(err, "")
		}
	}
	return got, done, nil
}

// wrap turns nats errors callers branch on into this package's.
func (c *Conn) wrap(err error, subject string) error {
	switch {
	case errors.Is(err, nats.ErrMaxPayload):
		return fmt.Errorf("%w (%d bytes) on %s: %w", ErrTooLarge, c.nc.MaxPayload(), subject, err)
	case errors.Is(err, nats.ErrReconnectBufExceeded), errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrConnectionClosed), errors.Is(err, nats.ErrDisconnected):
		return fmt.Errorf("%w: %w", ErrNotConnected, err)
	}
	return err
}

// Publish publishes one message for the nats handler kind: to JetStream with
// Nats-Msg-Id msgID when a stream captures subject (and waits for the ack),
// else on core NATS (flushed). hdr may be nil.
func (c *Conn) Publish(ctx context.Context, subject string, data []byte, msgID string, hdr nats.Header) error {
	if !c.nc.IsConnected() {
		return ErrNotConnected
	}
	stream, err := c.route(ctx, subject)
	if err != nil {
		return err
	}
	if hdr == nil {
		hdr = nats.Header{}
	}
	msg := &nats.Msg{Subject: subject, Data: data, Header: hdr}
	if stream != "" {
		_, err := c.js.PublishMsg(ctx, msg, jetstream.WithMsgID(msgID), jetstream.WithExpectStream(stream),
			jetstream.WithRetryAttempts(0))
		if err != nil {
			c.forget(subject)
			return fmt.Errorf("bus: publish to %s (stream %s): %w", subject, stream, c.wrap(err, subject))
		}
		return nil
	}
	msg.Header.Set(jetstream.MsgIDHeader, msgID)
	if err := c.nc.PublishMsg(msg); err != nil {
		return fmt.Errorf("bus: publish to %s: %w", subject, c.wrap(err, subject))
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
	}
	if err := c.nc.FlushWithContext(ctx); err != nil {
		return fmt.Errorf("bus: publish to %s: flush: %w", subject, c.wrap(err, subject))
	}
	return nil
}

// route returns the stream that captures subject ("" for none: core NATS).
func (c *Conn) route(ctx context.Context, subject string) (string, error) {
	c.mu.Lock()
	r, ok := c.routes[subject]
	c.mu.Unlock()
	if ok && time.Now().Before(r.until) {
		return r.stream, nil
	}
	name, err := c.js.StreamNameBySubject(ctx, subject)
	switch {
	case err == nil:
	case errors.Is(err, jetstream.ErrStreamNotFound), errors.Is(err, jetstream.ErrJetStreamNotEnabled),
		errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount), errors.Is(err, nats.ErrNoResponders):
		name = ""
	default:
		return "", fmt.Errorf("bus: look up the stream of %s: %w", subject, c.wrap(err, subject))
	}
	c.mu.Lock()
	c.routes[subject] = route{stream: name, until: time.Now().Add(routeTTL)}
	c.mu.Unlock()
	return name, nil
}

func (c *Conn) forget(subject string) {
	c.mu.Lock()
	delete(c.routes, subject)
	c.mu.Unlock()
}
