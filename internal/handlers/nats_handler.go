package handlers

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/nats-io/nats.go"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
)

// NATSPublisher is what the nats handler needs of a NATS connection
// (*bus.Conn has it).
type NATSPublisher interface {
	Publish(ctx context.Context, subject string, data []byte, msgID string, hdr nats.Header) error
}

// Headers the nats handler sets on every message besides Nats-Msg-Id.
const (
	HeaderChannel  = "Pgrelay-Channel"
	HeaderOriginID = "Pgrelay-Origin-Id"
	HeaderAttempt  = "Pgrelay-Attempt"
)

// NATS runs a nats channel: the event's payload is published to the
// channel's handler, a subject. With a JetStream stream on the subject the
// publish waits for the stream's ack and carries Nats-Msg-Id = origin_id, so
// the copy a retry publishes after a lost ack is dropped by the server;
// without one it goes out on core NATS. An error is a failed attempt like
// any other, except a payload over the server's max payload, which no retry
// can fix (Permanent).
type NATS struct {
	Bus NATSPublisher
	// OnTooLarge, when set, is called for each event given up for its size.
	OnTooLarge func(ev Event)
}

// Handle publishes ev's payload. A subject register() refuses now (one
// stored by a direct write: a "$" system subject such as $JS.API., or
// _INBOX.) is not published to: the event gives up (Permanent).
func (h NATS) Handle(ctx context.Context, ev Event) (bool, error) {
	if err := events.CheckChannelSubject(ev.Handler); err != nil {
		return false, Permanent(fmt.Errorf("nats channel %s: not published: %w", ev.Channel, err))
	}
	origin := strconv.FormatInt(ev.OriginID, 10)
	hdr := nats.Header{}
	hdr.Set(HeaderChannel, ev.Channel)
	hdr.Set(HeaderOriginID, origin)
	hdr.Set(HeaderAttempt, strconv.Itoa(ev.Attempt))
	err := h.Bus.Publish(ctx, ev.Handler, []byte(ev.Payload), origin, hdr)
	if errors.Is(err, bus.ErrTooLarge) {
		if h.OnTooLarge != nil {
			h.OnTooLarge(ev)
		}
		return false, Permanent(err)
	}
	return false, err
}
