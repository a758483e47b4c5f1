package pgrelay

import (
	"fmt"
	"time"
)

// RetryAfter is what a Go handler returns to fail this attempt and have the
// event retried after d, instead of after the channel's backoff (a remote
// service's Retry-After, a rate limit). It counts as an attempt: the attempt
// is recorded as failed with err's text ("retry after d: err"), and after
// max_attempts the event gives up. An event therefore never waits forever,
// and every postponement shows in pgrelay.log and on NATS; a handler that
// must wait longer without spending attempts enqueues a new, delayed event
// instead (Notify with Delay, in HandleTx's transaction) and returns nil,
// or snoozes (Snooze). d below 0 counts as 0. The error is a
// *RetryAfterError.
func RetryAfter(d time.Duration, err error) error {
	return &RetryAfterError{Delay: max(d, 0), Err: err}
}

// RetryAfterError is the error RetryAfter returns: errors.As finds it in a
// handler's result (in a middleware, a test).
type RetryAfterError struct {
	// Delay is when the retry is due, counted from the attempt's end.
	Delay time.Duration
	// Err is the attempt's failure (nil: none given).
	Err error
}

func (e *RetryAfterError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("retry after %s", e.Delay)
	}
	return fmt.Sprintf("retry after %s: %s", e.Delay, e.Err)
}

func (e *RetryAfterError) Unwrap() error { return e.Err }

// Permanent is what a Go handler returns when retrying cannot help (a
// payload it cannot parse, a refused card): the event gives up at once,
// whatever attempts it has left. Permanent(nil) is nil; any other error is
// a *PermanentError.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &PermanentError{Err: err}
}

// PermanentError is the error Permanent returns: errors.As finds it in a
// handler's result. Its text is Err's.
type PermanentError struct {
	Err error
}

func (e *PermanentError) Error() string { return e.Err.Error() }

func (e *PermanentError) Unwrap() error { return e.Err }

// Snooze is what a Go handler returns to put its event back for d without
// spending an attempt (River's JobSnooze): not a failure. The event is due
// again after d, the log records it as snoozed with the time it is due, and
// the work of a HandleTx or HandleTxBatch handler's transaction is rolled
// back as for any error. An event snoozes at most 1000 times
// (pgrelay._max_snoozes()): the snooze past that is recorded as a failed
// attempt, so an event's life stays bounded. A snoozed event of a
// serialised channel ('channel' or 'payload' mode) holds its lane: the
// events behind it wait for it. A batch handler's Snooze snoozes every
// event of its batch. d below 0 counts as 0. The error is a *SnoozeError.
func Snooze(d time.Duration) error {
	return &SnoozeError{Delay: max(d, 0)}
}

// SnoozeError is the error Snooze returns: errors.As finds it in a
// handler's result.
type SnoozeError struct {
	// Delay is when the event is due again, counted from the attempt's end.
	Delay time.Duration
}

func (e *SnoozeError) Error() string { return fmt.Sprintf("snooze for %s", e.Delay) }
