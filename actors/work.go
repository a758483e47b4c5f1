package actors

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// Worked is an event that Work ran, and what came of it.
type Worked struct {
	Event handlers.Event
	// Outcome is what pgrelay.log records of the attempt (succeeded,
	// failed, gave_up, expired), or events.Release when the attempt did not
	// count (the connection was lost outside the handler, ctx ended).
	Outcome events.Kind
	// Err is what the handler returned (or its panic, its timeout).
	Err error
}

// Work runs the ready events of channel, a go channel of one of
// cfg.GoHandlers, in the calling goroutine, as a started Processor runs
// them: each claimed, its handler run (HandleTx in the transaction that
// completes it) and its outcome completed, so pgrelay.log, the statuses
// and the retries are those of production. It runs each event (origin id)
// once, events enqueued while it works included, and returns when the
// channel has no ready event it has not run: a retry is a new pending
// event, which a later Work runs once it is due. It registers an instance
// in pgrelay.processors for its claims and unregisters it before it
// returns; no actor, listener or background work starts.
func Work(ctx context.Context, cfg Config, channel string) ([]Worked, error) {
	if cfg.DatabaseURL == "" {
		return nil, errors.New("pgrelay: a database URL is required")
	}
	cfg.defaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	p := &Processor{cfg: cfg}
	hotCfg, err := p.poolConfig(2, "pgrelay-work")
	if err != nil {
		return nil, err
	}
	bgCfg, err := p.poolConfig(2, "pgrelay-work-background")
	if err != nil {
		return nil, err
	}
	store.PinSearchPath(bgCfg.ConnConfig)
	stmts := &store.Statements{}
	hotCfg.AfterConnect = stmts.Warm
	hot, err := pgxpool.NewWithConfig(ctx, hotCfg)
	if err != nil {
		return nil, fmt.Errorf("pgrelay: work on channel %q: connect: %w", channel, err)
	}
	defer hot.Close()
	bg, err := pgxpool.NewWithConfig(ctx, bgCfg)
	if err != nil {
		return nil, fmt.Errorf("pgrelay: work on channel %q: connect: %w", channel, err)
	}
	defer bg.Close()
	st := store.New(hot, bg, stmts)

	host, _ := os.Hostname()
	info := store.ProcessorInfo{Mode: cfg.Mode, Hostname: host, PID: os.Getpid(), Version: cfg.Version}
	if _, err := st.RecordNode(ctx); err != nil {
		return nil, fmt.Errorf("pgrelay: work on channel %q: %w", channel, err)
	}
	procID, _, err := st.StartProcessor(ctx, info)
	if err != nil {
		return nil, fmt.Errorf("pgrelay: work on channel %q: %w", channel, err)
	}
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, err := st.StopProcessor(sctx, procID); err != nil {
			cfg.Logger.Warn("work: unregister", "processor", procID, "err", err)
		}
	}()
	names := make([]string, 0, len(cfg.GoHandlers))
	kinds := make([]string, 0, len(cfg.GoHandlers))
	for name := range cfg.GoHandlers {
		names = append(names, name)
		kinds = append(kinds, store.GoKind(name))
	}
	slices.Sort(kinds)
	if err := st.SetGoHandlers(ctx, procID, names); err != nil {
		return nil, fmt.Errorf("pgrelay: work on channel %q: %w", channel, err)
	}
	metrics, err := NewMetrics(nil)
	if err != nil {
		return nil, err
	}
	d := &deps{cfg: cfg, store: st, kinds: kinds, goHandlers: names, metrics: metrics,
		log: cfg.Logger.With("processor", procID, "work", channel), processor: procID, info: info, runCtx: ctx,
		tracing:  newTracing(cfg.TracerProvider),
		handlers: handlers.Registry{"go": handlers.Go{Store: st, Handlers: cfg.GoHandlers}}}
	w := worker{d: d, channel: channel, ran: map[int64]bool{}}
	for {
		n, err := w.round(ctx)
		if err != nil {
			return w.done, fmt.Errorf("pgrelay: work on channel %q: %w", channel, err)
		}
		if n == 0 {
			return w.done, nil
		}
	}
}

// worker is one Work call's state.
type worker struct {
	d       *deps
	channel string
	ran     map[int64]bool // origin ids run
	done    []Worked
}

// round claims what is ready, runs the channel's events it has not run and
// releases the rest; it returns how many it ran.
func (w *worker) round(ctx context.Context) (int, error) {
	scope := store.ClaimScope{Mode: w.d.cfg.Mode}
	limit := w.d.cfg.BatchSize
	// A 'none' channel is claimed alone; a serialised one with the others
	// of its kinds (its lanes' heads), the others released unrun.
	claimed, _, err := w.d.store.ClaimChannel(ctx, w.d.processor, scope, limit, w.channel, w.d.kinds, false, nil)
	if err != nil {
		return 0, err
	}
	if len(claimed) == 0 {
		if claimed, _, _, err = w.d.store.Claim(ctx, w.d.processor, scope, limit, w.d.kinds, false, nil); err != nil {
			return 0, err
		}
	}
	w.d.tracing.lookup(ctx, w.d, claimed)
	var outs []store.Outcome
	n := 0
	for _, c := range claimed {
		ev := handlers.Event{Claimed: c, ProcessorID: w.d.processor}
		if c.Channel != w.channel || w.ran[c.OriginID] {
			outs = append(outs, store.Outcome{ID: c.ID, ClaimedAt: c.DispatchedAt, Event: events.Release})
			continue
		}
		w.ran[c.OriginID] = true
		n++
		if c.Expired {
			outs = append(outs, store.Outcome{ID: c.ID, ClaimedAt: c.DispatchedAt, Event: events.Expired})
			w.done = append(w.done, Worked{Event: ev, Outcome: events.Expired})
			continue
		}
		start := time.Now()
		sctx, span := w.d.tracing.start(ctx, attemptOf(ev), time.Time{})
		committed, herr := invoke(w.d, sctx, ev)
		out := outcomeOf(w.d, ev, committed, herr, time.Since(start))
		k := events.Succeeded
		if out == nil && herr != nil {
			k = events.Release // the claim was taken back: nothing recorded
		}
		if out != nil {
			// One at a time, in order: the next event of a lane is ready
			// only once this one's outcome is written. Whether a failure
			// gave up is what the completion recorded.
			rec, err := w.d.store.Complete(context.WithoutCancel(ctx), w.d.processor, []store.Outcome{*out})
			if err != nil {
				return n, err
			}
			k = out.Event
			if k == events.Failed && rec.GaveUp[out.ID] {
				k = events.GaveUp
			}
		}
		w.d.tracing.end(span, attemptOf(ev), k, herr, time.Time{})
		w.done = append(w.done, Worked{Event: ev, Outcome: k, Err: herr})
	}
	if _, err := w.d.store.Complete(context.WithoutCancel(ctx), w.d.processor, outs); err != nil {
		return n, err
	}
	return n, nil
}
