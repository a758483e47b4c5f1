package processor

import (
	"context"
	"errors"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events"
)

// Outcome is an event that Work ran, and what came of it.
type Outcome struct {
	// Event is what the handler got.
	Event pgrelay.Event
	// Result is what pgrelay.log records of the attempt: "succeeded",
	// "failed" (to be retried), "gave_up" or "expired"; "released" when the
	// attempt did not count and the event is pending again (the database
	// connection was lost outside the handler, ctx ended).
	Result string
	// Err is what the handler returned: nil, its error, its panic or its
	// timeout.
	Err error
}

// Work runs the events of channel that are ready now, a go channel whose
// handler p has, in the calling goroutine and without Start: each is
// claimed, run by its handler (HandleTx's in the transaction that
// completes it) and completed as a started Processor does, so pgrelay.log,
// Status and the retries are those of production. Each event runs once,
// events enqueued meanwhile included; a retry is a new pending event that a
// later Work runs once it is due. It returns each outcome in the order the
// events ran. pgrelaytest.Work calls it from tests; a Processor that was
// started cannot Work.
func (p *Processor) Work(ctx context.Context, channel string) ([]Outcome, error) {
	p.mu.Lock()
	cfg := p.cfg.actorsConfig()
	cfg.GoHandlers = p.goHandlers()
	started := p.running != nil
	p.mu.Unlock()
	if started {
		return nil, errors.New("pgrelay: Work on a started Processor")
	}
	worked, err := actors.Work(ctx, cfg, channel)
	outs := make([]Outcome, len(worked))
	for i, w := range worked {
		result := string(w.Outcome)
		if w.Outcome == events.Release {
			result = "released"
		}
		outs[i] = Outcome{Event: eventOf(w.Event), Result: result, Err: w.Err}
	}
	return outs, err
}
