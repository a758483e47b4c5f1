package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// route caches where the nats handler publishes a subject.
type route struct {
	stream string // "" for core NATS
	until  time.Time
}

// routeTTL is how long a subject's stream lookup is trusted: streams change
// rarely, and a stale entry only costs one failed attempt.
const routeTTL = 10 * time.Second

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
