// Package processor embeds a pgrelay Processor in a Go program: it runs the
// events of pgrelay's channels of kind go with the program's Go functions,
// with the retries, timeouts, ordering and records of `pgrelay run`.
//
// A channel of kind go names a handler
// (pgrelay.register('order_placed', 'ship', p_kind := 'go')); the program
// registers a function under that name and starts the Processor:
//
//	p, err := processor.NewProcessor(processor.Config{DatabaseURL: url})
//	...
//	p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
//		_, err := tx.Exec(ctx, "INSERT INTO app.shipments ...", ev.Payload)
//		return err // the write commits with the event's success, or not at all
//	})
//	err = p.Start(ctx)
//	...
//	defer p.Stop(ctx)
//
// Handle registers a function for work outside the database (at least
// once: make it idempotent with ev.OriginID); HandleTxBatch one that runs
// the events of a claim in one transaction; HandleJSON and HandleTxJSON
// decode each payload into a Go type first. A handler's error is a failed
// attempt, retried with the channel's backoff; pgrelay.RetryAfter sets the
// retry's delay, pgrelay.Permanent gives up at once and pgrelay.Snooze
// puts the event back without spending an attempt.
//
// By default a Processor runs only the go channels it has handlers for;
// Config.Kinds adds sql, email and nats channels. A program that only
// enqueues imports the root package alone, which links none of this
// package's dependencies. docs/go.md has the whole story.
package processor

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// HandlerFunc is a Go handler run outside the database (an HTTP call, a
// message to another system): at-least-once, so it should be idempotent
// (ev.OriginID is the same on every attempt). ctx is cancelled at the
// channel's timeout and when the Processor stops.
type HandlerFunc func(ctx context.Context, ev pgrelay.Event) error

// TxHandlerFunc is a Go handler that writes to the database: what it writes
// through tx commits together with the event's success, or not at all
// (exactly once, as a sql channel's statement). It must not commit or roll
// back tx. ctx is cancelled at the channel's timeout, counted from when tx
// began (in a batch, from when fn is called), and when the Processor stops.
type TxHandlerFunc func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error

// Processor is a Processor embedded in a Go program: it runs the channels
// of kind go with the program's handlers (and the kinds of Config.Kinds)
// as `pgrelay run` runs its channels. Register every handler, then Start;
// Stop before the program exits. Several replicas of the program share the
// work as several `pgrelay run` do.
type Processor struct {
	cfg      Config
	mu       sync.Mutex
	handlers map[string]handlers.GoHandler
	// middleware wraps every handler (Use), outermost first.
	middleware []Middleware
	running    *actors.Processor
}

// NewProcessor validates cfg and prepares a Processor; it connects nothing
// until Start.
func NewProcessor(cfg Config) (*Processor, error) {
	if _, err := actors.New(cfg.actorsConfig()); err != nil {
		return nil, err
	}
	return &Processor{cfg: cfg, handlers: map[string]handlers.GoHandler{}}, nil
}

// Handle registers fn as the Go handler name: the events of every channel
// registered with p_kind := 'go' and p_handler := name. It panics if name is
// not a valid handler name (1 to 100 letters, digits, '_', '.' or '-',
// starting with a letter or '_'), if fn is nil, if name has a handler
// already, or after Start, as http.ServeMux does: these are programming
// errors.
func (p *Processor) Handle(name string, fn HandlerFunc) {
	if fn == nil {
		panic(fmt.Sprintf("pgrelay: Handle(%q): nil function", name))
	}
	p.register(name, handlers.GoHandler{Fn: func(ctx context.Context, _ pgx.Tx, ev handlers.Event) error {
		return fn(ctx, eventOf(ev))
	}})
}

// HandleTx registers fn as the Go handler name, run in the transaction that
// completes its event: as Handle, but what fn writes through tx commits
// with the event's success, or not at all. The events of a 'none' channel
// run in direct batches, as a 'none' sql channel's do: a transaction locks
// up to Config.SQLBatch ready events (no claim is committed first) and
// calls fn for each in turn under a savepoint of the event's own, taken
// when fn first uses tx: an error, a panic or a timeout rolls back to it and
// costs that event an attempt, the others commit with one completion.
// SQLBatch 1, and the 'channel' and 'payload' modes, claim each event and
// give it a transaction of its own.
func (p *Processor) HandleTx(name string, fn TxHandlerFunc) {
	if fn == nil {
		panic(fmt.Sprintf("pgrelay: HandleTx(%q): nil function", name))
	}
	p.register(name, handlers.GoHandler{Tx: true, Fn: func(ctx context.Context, tx pgx.Tx, ev handlers.Event) error {
		return fn(ctx, tx, eventOf(ev))
	}})
}

// TxBatchHandlerFunc is a Go handler that runs several events of its
// channel at once in the transaction that completes them all: what it
// writes through tx commits with the success of every one of evs, or not
// at all. It must not commit or roll back tx. ctx is cancelled at the
// channel's timeout (for the whole batch), counted from when tx began, and
// when the Processor stops.
type TxBatchHandlerFunc func(ctx context.Context, tx pgx.Tx, evs []pgrelay.Event) error

// HandleTxBatch registers fn as the Go handler name, run on batches: the
// events of a 'none' channel that one claim brings (up to Config.BatchSize)
// run in one call and one transaction, with one commit, where HandleTx
// calls its function once per event. The batch succeeds or fails as a whole:
// an error (a panic, a timeout) is a failed attempt of each of its events,
// Permanent gives them all up, RetryAfter delays every retry, Snooze
// snoozes them all. In 'channel' and 'payload' modes, which run one event
// at a time (per lane), evs holds one event. It panics as Handle does.
func (p *Processor) HandleTxBatch(name string, fn TxBatchHandlerFunc) {
	if fn == nil {
		panic(fmt.Sprintf("pgrelay: HandleTxBatch(%q): nil function", name))
	}
	p.register(name, handlers.GoHandler{Batch: func(ctx context.Context, tx pgx.Tx, evs []handlers.Event) error {
		batch := make([]pgrelay.Event, len(evs))
		for i, ev := range evs {
			batch[i] = eventOf(ev)
		}
		return fn(ctx, tx, batch)
	}})
}

func (p *Processor) register(name string, h handlers.GoHandler) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch {
	case !handlers.GoHandlerName.MatchString(name):
		panic(fmt.Sprintf("pgrelay: %q is not a valid Go handler name (1 to 100 letters, digits, \"_\", \".\" or \"-\", starting with a letter or \"_\")", name))
	case p.running != nil:
		panic(fmt.Sprintf("pgrelay: handler %q registered after Start", name))
	}
	if _, dup := p.handlers[name]; dup {
		panic(fmt.Sprintf("pgrelay: handler %q registered twice", name))
	}
	p.handlers[name] = h
}

// eventOf is the Event a Go handler gets.
func eventOf(ev handlers.Event) pgrelay.Event {
	return pgrelay.Event{ID: ev.ID, OriginID: ev.OriginID, Channel: ev.Channel, Payload: ev.Payload,
		Attempt: ev.Attempt, MaxAttempts: ev.MaxAttempts, EnqueuedAt: ev.EnqueuedAt}
}

// Start checks that the database's pgrelay schema is the one this package
// needs (as `pgrelay run` does: run `pgrelay migrate`, or migrations.Up,
// first), connects, registers the instance and starts claiming; it returns
// once the Processor is claiming. A Processor starts once.
func (p *Processor) Start(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running != nil {
		return errors.New("pgrelay: processor already started")
	}
	cfg := p.cfg.actorsConfig()
	if len(p.handlers) == 0 && len(cfg.Kinds) == 0 {
		return errors.New("pgrelay: processor has nothing to run: register a Go handler, or give Config.Kinds")
	}
	cfg.GoHandlers = p.goHandlers()
	running, err := actors.New(cfg)
	if err != nil {
		return err
	}
	// It counts as started once it has: after a refusal (an older schema),
	// migrate and Start again.
	if err := running.Start(ctx); err != nil {
		return err
	}
	p.running = running
	return nil
}

// Stop stops gracefully: it stops claiming, lets running handlers finish
// within Config.ShutdownTimeout, then cancels their contexts (their events
// go back to pending without spending an attempt), writes every outcome and
// unregisters the instance. Safe to call more than once, and before Start.
func (p *Processor) Stop(ctx context.Context) error {
	p.mu.Lock()
	running := p.running
	p.mu.Unlock()
	if running == nil {
		return nil
	}
	return running.Stop(ctx)
}

// Run starts the Processor and stops it gracefully when ctx is done.
func (p *Processor) Run(ctx context.Context) error {
	if err := p.Start(ctx); err != nil {
		return err
	}
	<-ctx.Done()
	return p.Stop(context.WithoutCancel(ctx))
}

// ID is the instance's id in pgrelay.processors (0 before Start).
func (p *Processor) ID() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running == nil {
		return 0
	}
	return p.running.ID()
}
