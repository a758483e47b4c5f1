package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/prcodes"
)

// GoDirect runs the Go functions of the direct batches of go channels
// (RunGoDirect).
type GoDirect struct {
	// Run runs the Go handler of e with tx, the batch's transaction under
	// e's own savepoint, under ctx (e's timeout, counted from when it is
	// called). A panic of the handler is Run's to turn into its error.
	Run func(ctx context.Context, tx pgx.Tx, e *DirectEvent) error
	// Outcome is what to record for e given its handler's result (nil:
	// succeeded; a *HandlerError otherwise): its Event (events.Succeeded,
	// events.Failed, events.GaveUp or events.Snoozed), Error, RetryAfter and
	// SnoozeFor.
	Outcome func(e *DirectEvent, err error) Outcome
	// Trace, when set (a tracing Processor), reads the producers' trace
	// contexts of a round's events in the batch's transaction, once the
	// round is claimed and before any handler runs: one query per round.
	Trace func(ctx context.Context, tx pgx.Tx, evs []DirectEvent) error
}

// RunGoDirect is RunDirect for a 'none' go channel whose handler, of kind
// GoKind(name) in kinds, runs in the event's transaction (HandleTx): a
// transaction locks up to limit ready rows of the channel, runs the Go
// handler of each under a savepoint of its own (taken when the handler first
// uses its tx: eachTx) and records every outcome with one
// pgrelay._complete and one commit. No claim is written: a Processor that
// dies mid-batch leaves the rows pending, no attempt counted.
//
// A handler that fails (an error, a panic Run turned into one, its timeout,
// a statement that failed even if it went on) rolls back to its savepoint
// and costs its own event an attempt. A handler that loses the batch's
// connection is charged alone, on another connection, and the others run
// again; a transaction refused at its completion or COMMIT runs its events
// again one per transaction (runBatch). When ctx is cancelled (a stop), the
// events not run yet are left pending and what ran commits all the same.
func (s *Store) RunGoDirect(ctx context.Context, scope ClaimScope, channel string, kinds []string, limit int,
	g GoDirect) (*DirectBatch, error) {
	round := func(ctx context.Context, what string, b *DirectBatch, claim string, args ...any) error {
		return s.runGoRound(ctx, g, what, b, claim, args...)
	}
	return s.runBatch(ctx, "channel "+channel, &DirectBatch{Scope: scope}, round,
		claimDirectSQL, directArgs(scope, channel, kinds), limit, LaneKey{})
}

// runGoRound claims and runs one round of a Go direct batch on one
// connection.
func (s *Store) runGoRound(ctx context.Context, g GoDirect, what string, b *DirectBatch, claim string, args ...any) error {
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection for a batch of %s: %w", what, err)
	}
	defer conn.Release()
	start := time.Now()
	defer func() { b.Took = time.Since(start) }()
	pc := conn.Conn().PgConn()
	// The completion and the commit run after a stop too: what ran is
	// recorded; a backstop bounds them.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), directClaimTimeout)
	defer cancel()
	cctx, ccancel := context.WithTimeout(ctx, directClaimTimeout)
	tx, err := conn.Begin(cctx)
	if err == nil {
		// Rolls back whatever did not commit before the connection goes
		// back to the pool (a no-op after the commit).
		defer func() { _ = tx.Rollback(done) }()
		err = claimGo(cctx, tx, b, claim, args...)
		if err == nil && g.Trace != nil && len(b.Events) > 0 {
			err = g.Trace(cctx, tx, b.Events)
		}
	}
	ccancel()
	if err != nil {
		b.Events = nil
		return fmt.Errorf("claim a batch of %s: %w", what, err)
	}
	if len(b.Events) == 0 {
		return nil
	}
	for _, e := range b.Events {
		if e.Kind != "go" {
			return fmt.Errorf("batch of %s: event %d is of kind %q, not go", what, e.ID, e.Kind)
		}
	}
	// Each handler is cut by its timeout; the deadline bounds the batch
	// should the server or the network stop answering.
	rctx, rcancel := context.WithTimeout(ctx, batchBudget(b.Events))
	defer rcancel()
	resets := s.statements.of(pc).resets
	// held: the last handler's savepoint is held; used: a handler's work
	// (and what it set) stays in the transaction.
	held, used := false, false
	ran := 0
	hstart := time.Now()
	for i := range b.Events {
		e := &b.Events[i]
		if e.Expired {
			e.Outcome = events.Expired
			continue
		}
		if ctx.Err() != nil {
			continue // stopping: left pending, unrun
		}
		ev := &eachTx{Tx: tx, held: held}
		herr := ev.run(rctx, e.Timeout, func(hctx context.Context) error { return g.Run(hctx, ev, e) })
		if herr == nil && pc.IsClosed() {
			herr = errors.New("the handler's connection was lost")
		}
		if herr != nil {
			herr = &HandlerError{Err: herr}
		}
		if pc.IsClosed() {
			// The handler's statement lost the connection (its deadline
			// closes it): the transaction is gone with the work of the
			// events before it.
			cancelOrphan(done, pc)
			b.forgetAll()
			return &lostHandler{k: i, err: herr}
		}
		if err := ev.end(done, herr != nil); err != nil {
			// The savepoint could not be rolled back (a handler that
			// panicked with rows open leaves the connection busy): the
			// transaction cannot go on, and the pool closes the connection.
			b.forgetAll()
			return &lostHandler{k: i, err: fmt.Errorf("%w; %w", herr, err)}
		}
		held = ev.held
		used = used || held
		ran++
		out := g.Outcome(e, herr)
		if out.Event == events.Release {
			continue // stopping cut the handler: its event is left pending
		}
		e.Outcome, e.retryAfter, e.snoozeFor = out.Event, out.RetryAfter, out.SnoozeFor
		if out.Event != events.Succeeded && out.Event != events.Snoozed {
			e.Err = errors.New(out.Error)
		}
	}
	if ran > 0 {
		b.HandlerTime, b.Timed = time.Since(hstart), ran
	}
	if err := b.completeGo(done, tx, resets, used); err != nil {
		b.forgetAll()
		var pgErr *pgconn.PgError
		if ctx.Err() == nil && errors.As(err, &pgErr) && pgErr.Code != prcodes.LeaseEnded && !sessionGone(pc, err) {
			return &lateFailure{stmt: "the batch's transaction", err: err}
		}
		return fmt.Errorf("batch of %d events of %s: %w", len(b.Events), what, err)
	}
	return nil
}

// completeGo records the outcomes of a Go batch's events that have one in
// tx and commits: the session reset first when a handler's work stays in
// the transaction (what the handlers set goes no further), the leader's
// fence.
func (b *DirectBatch) completeGo(ctx context.Context, tx pgx.Tx, resets []string, used bool) error {
	outs := make([]Outcome, 0, len(b.Events))
	for _, e := range b.Events {
		if e.Outcome == "" {
			continue
		}
		o := Outcome{ID: e.ID, Event: e.Outcome, RetryAfter: e.retryAfter, OriginID: e.OriginID, SnoozeFor: e.snoozeFor}
		if e.Err != nil {
			o.Error = e.Err.Error()
		}
		outs = append(outs, o)
	}
	var gaveUp map[int64]bool
	pre := &pgx.Batch{}
	if used {
		for _, r := range resets {
			pre.Queue(r)
		}
	}
	if term, ok := b.Scope.fence(); ok {
		pre.Queue(fenceSQL, term)
	}
	if pre.Len() > 0 {
		if err := tx.SendBatch(ctx, pre).Close(); err != nil {
			return fmt.Errorf("reset the session: %w", err)
		}
	}
	if len(outs) > 0 {
		rec, err := complete(ctx, tx, nil, outs)
		if err != nil {
			return fmt.Errorf("recording the outcomes (pgrelay._complete_outcomes): %w", err)
		}
		if rec.N != len(outs) {
			return fmt.Errorf("recorded %d of %d outcomes of rows the batch holds", rec.N, len(outs))
		}
		gaveUp = rec.GaveUp
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	b.markGaveUp(gaveUp)
	return nil
}

// forgetAll clears the outcomes of every event of b: none was recorded.
func (b *DirectBatch) forgetAll() {
	for i := range b.Events {
		b.Events[i].Outcome, b.Events[i].Err, b.Events[i].retryAfter, b.Events[i].snoozeFor = "", nil, 0, 0
	}
}

// claimGo runs a Go batch's claim in tx, whose rows become b's events.
func claimGo(ctx context.Context, tx pgx.Tx, b *DirectBatch, claim string, args ...any) error {
	rows, err := tx.Query(ctx, claim, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var e DirectEvent
		var timeoutMS int64
		if err := rows.Scan(&e.ID, &e.OriginID, &e.Channel, &e.Lane, &e.Payload, &e.Attempt, &e.EnqueuedAt,
			&e.Expired, &e.Handler, &timeoutMS, &e.MaxAttempts, &e.Kind); err != nil {
			return err
		}
		e.Timeout = time.Duration(timeoutMS) * time.Millisecond
		b.Events = append(b.Events, e)
	}
	return rows.Err()
}
