package handlers

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/events/store"
)

// GoFunc is a Go handler of channels of kind go. Tx handlers get the
// transaction in which the event's success is written; plain ones get a nil
// tx.
type GoFunc func(ctx context.Context, tx pgx.Tx, ev Event) error

// GoBatchFunc is a Go handler that runs several events of its channel at
// once, in the transaction that completes them all.
type GoBatchFunc func(ctx context.Context, tx pgx.Tx, evs []Event) error

// GoHandler is one Go handler: its function and whether it runs in the
// event's completion transaction; or, with Batch set, a batch function.
type GoHandler struct {
	Fn    GoFunc
	Tx    bool
	Batch GoBatchFunc
}

// GoHandlerName is what a Go handler's name must match, as
// pgrelay._check_channel checks the handler of a go channel.
var GoHandlerName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.-]{0,99}$`)

// Go runs the events of go channels: the function registered under the
// channel's handler name. The channel's timeout bounds it (its context is
// cancelled then); a transactional handler's clock starts once it has its
// connection.
type Go struct {
	Store    *store.Store
	Handlers map[string]GoHandler
}

// IsBatch reports whether the Go handler name runs events in batches.
func (h Go) IsBatch(name string) bool { return h.Handlers[name].Batch != nil }

// IsTx reports whether the Go handler name runs each event in the
// transaction that completes it (HandleTx).
func (h Go) IsTx(name string) bool {
	gh := h.Handlers[name]
	return gh.Tx && gh.Fn != nil && gh.Batch == nil
}

// CallTx runs the HandleTx handler of ev with tx, the transaction that
// completes it (a direct batch's, under ev's savepoint), under ctx, which
// bounds it: returning nil once ctx is done is no success.
func (h Go) CallTx(ctx context.Context, tx pgx.Tx, ev Event) error {
	if !h.IsTx(ev.Handler) {
		return fmt.Errorf("no Go transactional handler %q in this Processor", ev.Handler)
	}
	return finished(ctx, h.Handlers[ev.Handler].Fn(ctx, tx, ev))
}

// HandleBatch runs the batch handler of evs (events of one channel, with
// one handler) in one transaction that completes them all: its writes and
// every event's success commit together, or nothing does. The channel's
// timeout bounds the batch. Its errors come back as store.HandlerError;
// store.ErrClaimLost when one of the claims was taken back.
func (h Go) HandleBatch(ctx context.Context, evs []Event) error {
	gh := h.Handlers[evs[0].Handler]
	if gh.Batch == nil {
		return fmt.Errorf("no Go batch handler %q in this Processor", evs[0].Handler)
	}
	claims := make([]store.Claimed, len(evs))
	for i, ev := range evs {
		claims[i] = ev.Claimed
	}
	return h.Store.RunGoTxBatch(ctx, evs[0].ProcessorID, claims, evs[0].Timeout,
		func(ctx context.Context, tx pgx.Tx) error { return gh.Batch(ctx, tx, evs) })
}

// Handle runs the handler named by ev.Handler. Its errors come back as
// store.HandlerError (the handler's own failure, counted as an attempt).
func (h Go) Handle(ctx context.Context, ev Event) (bool, error) {
	gh, ok := h.Handlers[ev.Handler]
	if ok && gh.Batch != nil {
		// A batch of one (a serialised channel runs one event at a time).
		err := h.HandleBatch(ctx, []Event{ev})
		return err == nil, err
	}
	if !ok || gh.Fn == nil {
		// The claim offers this Processor only the names it has.
		return false, fmt.Errorf("no Go handler %q in this Processor", ev.Handler)
	}
	if gh.Tx {
		err := h.Store.RunGoTx(ctx, ev.ProcessorID, ev.Claimed, ev.Timeout,
			func(ctx context.Context, tx pgx.Tx) error { return finished(ctx, gh.Fn(ctx, tx, ev)) })
		return err == nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, ev.Timeout)
	defer cancel()
	if err := gh.Fn(ctx, nil, ev); err != nil {
		return false, &store.HandlerError{Err: err}
	}
	return false, nil
}

// finished is what a transactional handler that returned err under ctx
// achieved: returning nil once ctx is done (past its timeout, or stopped)
// is no success, as its transaction is no longer to commit.
func finished(ctx context.Context, err error) error {
	if err != nil {
		return err
	}
	return ctx.Err()
}

// RetryAfter marks a failed attempt whose retry is due after d instead of
// the channel's backoff (pgrelay.RetryAfter). It counts as an attempt.
func RetryAfter(d time.Duration, err error) error { return pgrelay.RetryAfter(d, err) }

// RetryDelay is the delay RetryAfter put on err, if it did.
func RetryDelay(err error) (time.Duration, bool) {
	var r *pgrelay.RetryAfterError
	if errors.As(err, &r) {
		return r.Delay, true
	}
	return 0, false
}

// SnoozeDelay is the delay Snooze put on err, if the handler snoozed
// (pgrelay.Snooze): the event is due again after it, no attempt spent.
func SnoozeDelay(err error) (time.Duration, bool) {
	var z *pgrelay.SnoozeError
	if errors.As(err, &z) {
		return z.Delay, true
	}
	return 0, false
}
