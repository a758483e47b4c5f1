package pgrelay

import (
	"time"

	"github.com/pgrelay/pgrelay/internal/handlers"
)

// RetryAfter is what a Go handler returns to fail this attempt and have the
// event retried after d, instead of after the channel's backoff (a remote
// service's Retry-After, a rate limit). It counts as an attempt: the attempt
// is recorded as failed with err's text ("retry after d: err"), and after
// max_attempts the event gives up. An event therefore never waits forever,
// and every postponement shows in pgrelay.log and on NATS; a handler that
// must wait longer without spending attempts enqueues a new, delayed event
// instead (Notify with Delay, in HandleTx's transaction) and returns nil.
// d below 0 counts as 0.
func RetryAfter(d time.Duration, err error) error { return handlers.RetryAfter(d, err) }

// Permanent is what a Go handler returns when retrying cannot help (a
// payload it cannot parse, a refused card): the event gives up at once,
// whatever attempts it has left. Permanent(nil) is nil.
func Permanent(err error) error { return handlers.Permanent(err) }
