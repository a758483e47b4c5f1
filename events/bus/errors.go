package bus

import (
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
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
