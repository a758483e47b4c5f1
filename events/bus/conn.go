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

	"github.com/pgrelay/pgrelay/internal/secret"
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
	// RequestTimeout bounds each JetStream API request (account info, the
	// stream's look-up, creation and update), whatever the caller's
	// deadline (default 5s).
	RequestTimeout time.Duration
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
	// requestTimeout: see Options.RequestTimeout.
	requestTimeout time.Duration

	mu      sync.Mutex
	routes  map[string]route
	connErr string // the last connection failure logged, "" once connected
}

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
	if o.RequestTimeout <= 0 {
		o.RequestTimeout = 5 * time.Second
	}
	c := &Conn{log: o.Logger, routes: map[string]route{}, requestTimeout: o.RequestTimeout}
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
			c.log.Info("connected to NATS", "url", secret.String(nc.ConnectedUrl()))
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.noteConnErr("")
			c.gen.Add(1)
			c.log.Info("reconnected to NATS", "url", secret.String(nc.ConnectedUrl()))
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
		jetstream.WithDefaultTimeout(o.RequestTimeout))
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

// apiContext bounds one JetStream API request by the request timeout. The
// caller's deadline may be much longer (a publishing round has a minute):
// a request no server answers, as one sent while a cluster elects a new
// leader, then fails after the timeout and the caller sends it again,
// instead of waiting out its whole deadline.
func (c *Conn) apiContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.requestTimeout)
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
