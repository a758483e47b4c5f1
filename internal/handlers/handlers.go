// Package handlers holds what runs an event of each channel kind: plain Go
// behind one small interface, testable without an actor system.
package handlers

import (
	"context"
	"errors"
	"fmt"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/events/store"
)

// Event is a claimed event handed to a handler.
type Event struct {
	store.Claimed
	// ProcessorID is the claiming Processor instance.
	ProcessorID int64
}

// Handler runs one event. committed reports that the handler itself recorded
// the event's success in the database (a sql handler commits its effects and
// the completion together); otherwise a nil error means success to record.
type Handler interface {
	Handle(ctx context.Context, ev Event) (committed bool, err error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, ev Event) (bool, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, ev Event) (bool, error) { return f(ctx, ev) }

// Permanent marks err as not worth retrying: the event gives up at once
// (pgrelay.Permanent, which Go handlers return).
func Permanent(err error) error { return pgrelay.Permanent(err) }

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	var p *pgrelay.PermanentError
	return errors.As(err, &p)
}

// SQL runs a sql channel's statement with $1 = payload; its effects and the
// event's completion commit in one transaction.
type SQL struct {
	Store *store.Store
}

// Handle runs the channel's statement.
func (h SQL) Handle(ctx context.Context, ev Event) (bool, error) {
	if err := h.Store.RunSQL(ctx, ev.ProcessorID, ev.Claimed); err != nil {
		return false, err
	}
	return true, nil
}

// Registry maps a channel kind to its handler.
type Registry map[string]Handler

// Lookup returns the handler for kind, or an error naming the kind.
func (r Registry) Lookup(kind string) (Handler, error) {
	h, ok := r[kind]
	if !ok || h == nil {
		return nil, fmt.Errorf("no handler for channel kind %q in this Processor", kind)
	}
	return h, nil
}
