package processor

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay"
)

// HandleJSON registers fn as the Go handler name, as Handle does, with each
// event's payload decoded from JSON into a T (encoding/json: fields the T
// does not have are ignored). A payload that does not decode is a
// permanent failure: the event gives up at once, with an error naming T
// and the decoder's error, and fn is not called. pgrelay.NotifyJSON
// enqueues such payloads; any producer may, SQL's notify() included. It
// panics as Handle does.
func HandleJSON[T any](p *Processor, name string, fn func(ctx context.Context, ev pgrelay.Event, v T) error) {
	if fn == nil {
		panic(fmt.Sprintf("pgrelay: HandleJSON(%q): nil function", name))
	}
	p.Handle(name, func(ctx context.Context, ev pgrelay.Event) error {
		v, err := decodeJSON[T](ev)
		if err != nil {
			return err
		}
		return fn(ctx, ev, v)
	})
}

// HandleTxJSON registers fn as the Go handler name, as HandleTx does (in the
// transaction that completes the event), with each event's payload decoded
// from JSON into a T, as HandleJSON decodes it.
func HandleTxJSON[T any](p *Processor, name string, fn func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event, v T) error) {
	if fn == nil {
		panic(fmt.Sprintf("pgrelay: HandleTxJSON(%q): nil function", name))
	}
	p.HandleTx(name, func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		v, err := decodeJSON[T](ev)
		if err != nil {
			return err
		}
		return fn(ctx, tx, ev, v)
	})
}

// decodeJSON is ev's payload as a T, or the permanent failure of a payload
// that is not one.
func decodeJSON[T any](ev pgrelay.Event) (T, error) {
	var v T
	if err := json.Unmarshal([]byte(ev.Payload), &v); err != nil {
		return v, pgrelay.Permanent(fmt.Errorf("payload of event %d is not a JSON %s: %w",
			ev.OriginID, reflect.TypeFor[T](), err))
	}
	return v, nil
}
