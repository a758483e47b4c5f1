package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/prcodes"
)

// ClaimScope says which rows a Processor may claim: its mode and, in leader
// mode, the lease term it believes it holds (0: not the leader).
type ClaimScope struct {
	Mode string
	Term int64
}

func (c ClaimScope) args() (leader bool, term *int64) {
	if c.Term > 0 {
		t := c.Term
		return true, &t
	}
	return false, nil
}

// fence reports whether a batch of this scope sends _batch_fence before it
// records its outcomes (a leader's batch, in leader mode), and the term it
// names. The rule itself, pgrelay._holds_lease, is the database's.
func (c ClaimScope) fence() (term int64, ok bool) {
	return c.Term, c.Mode == "leader" && c.Term > 0
}

// DirectEvent is one event of a direct batch and what became of it.
type DirectEvent struct {
	ID          int64
	OriginID    int64
	Channel     string
	Lane        int64 // in a lane batch
	Payload     string
	Attempt     int
	EnqueuedAt  time.Time
	Expired     bool // past expires_at when claimed: recorded, not run
	Handler     string
	Timeout     time.Duration
	MaxAttempts int
	Kind        string // the channel's: sql, or go (RunGoDirect)
	// Traceparent: the producer's trace context, read by GoDirect.Trace
	// ("" for none, or when the Processor does not trace).
	Traceparent string

	// Outcome is what the batch recorded: events.Succeeded, events.Failed,
	// events.GaveUp (a failure the completion recorded as the last attempt,
	// or a permanent one), events.Expired, or "" when the batch recorded
	// nothing (it failed; the event is pending again).
	Outcome events.Kind
	// Err is the handler's error of a failed event.
	Err error
	// retryAfter: a Go handler's RetryAfter, for a failed event.
	retryAfter time.Duration
	// snoozeFor: a Go handler's Snooze, for a snoozed event.
	snoozeFor time.Duration
}

// DirectBatch is a direct batch: of one 'none' sql channel (RunDirect), of
// one 'none' go channel of a HandleTx handler (RunGoDirect), or of the heads
// of serialised lanes (RunLanes).
type DirectBatch struct {
	Scope ClaimScope
	// Events are the events of every round of the batch, in order: an event
	// that ran again after its round failed as a whole (a handler that lost
	// the connection, a failure at COMMIT) is there once per round, with no
	// outcome in the round that failed.
	Events []DirectEvent
	// Took is the batch's time once it had a connection.
	Took time.Duration
	// HandlerTime is the server's time running the handlers of Timed
	// events (those of the pipeline that committed), without the claim and
	// the completion: what a batch's size should follow.
	HandlerTime time.Duration
	Timed       int
	// TimingErr: the server's clock readings could not be read (the batch
	// committed all the same; its time per event is then its wall time).
	TimingErr error
	// clock is the server's clock (µs since the epoch) before the handlers
	// of the pipeline whose handler failed last.
	clock int64
	// recycled: a sql batch, whose events slice comes from the Store's
	// finished batches and goes back to them (Recycle).
	recycled bool
}

// minRecycled is the smallest batch whose events slice is recycled: smaller
// ones are left to the collector.
const minRecycled = 64

// eventsSlice is a finished sql batch's events slice, emptied, for a round
// of up to limit events; nil when there is none or the round is small.
func (s *Store) eventsSlice(limit int) []DirectEvent {
	if limit < minRecycled {
		return nil
	}
	if p, ok := s.events.Get().(*[]DirectEvent); ok {
		return (*p)[:0]
	}
	return nil
}

// Recycle gives the Store back the events slice of a batch of RunDirect or
// RunLanes once its caller is done with it: nothing may read b.Events after.
// A batch of 1 000 events grows its slice to a few hundred KB: before the
// slices were reused, over a third of what a drain allocated. Other batches
// are left alone.
func (s *Store) Recycle(b *DirectBatch) {
	if b == nil || !b.recycled {
		return
	}
	ev := b.Events[:cap(b.Events)]
	b.Events = nil
	if len(ev) < minRecycled {
		return
	}
	clear(ev) // keeps no payload alive
	ev = ev[:0]
	s.events.Put(&ev)
}

// LaneKey is where a walk over the lanes stands: a lane batch takes the
// lanes after it (the zero key: from the start).
type LaneKey struct {
	Channel string
	Lane    int64
}

// Last is the lane of a lane batch's last event (the zero key when it has
// none): where the next batch goes on.
func (b *DirectBatch) Last() LaneKey {
	if b == nil || len(b.Events) == 0 {
		return LaneKey{}
	}
	e := b.Events[len(b.Events)-1]
	return LaneKey{Channel: e.Channel, Lane: e.Lane}
}

// RunDirect claims up to limit ready events of the 'none' sql channel by
// locking their rows in a transaction, runs each handler under its own
// savepoint with the channel's timeout as statement_timeout, and records
// every outcome in the same transaction: the handlers' effects and the
// completions commit together, with one commit for the batch. Nothing is
// written to claim the rows, so a Processor that dies mid-batch leaves them
// pending.
//
// The batch's statements go to the server in one pipeline. When a handler
// fails, the server skips the rest of the pipeline; the batch rolls back to
// that event's savepoint and sends the rest in a new pipeline.
//
// An error means the batch recorded nothing of what it had not committed:
// those events are pending again, no attempt counted. A batch that finds
// nothing to run returns an empty batch.
func (s *Store) RunDirect(ctx context.Context, scope ClaimScope, channel string, limit int) (*DirectBatch, error) {
	return s.runBatch(ctx, "channel "+channel, &DirectBatch{Scope: scope, recycled: true}, s.runRound,
		claimDirectSQL, directArgs(scope, channel, []string{"sql"}), limit, LaneKey{})
}

// claimDirectSQL is the claim of a direct batch of one 'none' channel.
const claimDirectSQL = "SELECT id, origin_id, $1::pg_catalog.text, 0::pg_catalog.int8, payload, attempt, enqueued_at, expired, handler, timeout_ms, max_attempts, kind" +
	" FROM pgrelay._claim_direct($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.bool, $4::pg_catalog.int8, $5::pg_catalog.int4, $6::pg_catalog.text[])"

// directArgs are claimDirectSQL's arguments for channel, of one of kinds.
func directArgs(scope ClaimScope, channel string, kinds []string) claimArgs {
	leader, term := scope.args()
	return func(n int, _ LaneKey) []any { return []any{channel, scope.Mode, leader, term, n, kinds} }
}

// RunLanes is RunDirect for the serialised sql channels ('channel' and
// 'payload' mode): the batch takes the heads of up to limit lanes, one event
// per lane, walking the lanes from after (see pgrelay._claim_lanes_direct).
// While the batch runs, its lanes are held: no other batch or claim takes
// their next event until it commits. Their handlers run in the batch one
// after the other, each under its own savepoint and its channel's timeout.
func (s *Store) RunLanes(ctx context.Context, scope ClaimScope, after LaneKey, limit int) (*DirectBatch, error) {
	leader, term := scope.args()
	return s.runBatch(ctx, "lanes", &DirectBatch{Scope: scope, recycled: true}, s.runRound,
		"SELECT id, origin_id, channel, lane, payload, attempt, enqueued_at, expired, handler, timeout_ms, max_attempts, 'sql'::pg_catalog.text"+
			" FROM pgrelay._claim_lanes_direct($1::pg_catalog.text, $2::pg_catalog.bool, $3::pg_catalog.int8, $4::pg_catalog.int4, $5::pg_catalog.text, $6::pg_catalog.int8)",
		func(n int, after LaneKey) []any {
			var afterCh *string
			var afterLane *int64
			if after.Channel != "" {
				afterCh, afterLane = &after.Channel, &after.Lane
			}
			return []any{scope.Mode, leader, term, n, afterCh, afterLane}
		}, limit, after)
}

// claimArgs are the arguments of a batch's claim for up to n events, from
// the lane after (lane batches).
type claimArgs func(n int, after LaneKey) []any

// roundFunc claims and runs one round of a batch (runRound, or a Go
// batch's).
type roundFunc func(ctx context.Context, what string, b *DirectBatch, claim string, args ...any) error

// runBatch runs a batch of up to limit events, in rounds:
//   - a handler that loses the connection: its event alone is charged, and
//     the others run again with the same claim (up to maxRounds times);
//   - a batch that fails after its handlers ran (at COMMIT: a deferred
//     constraint, a constraint trigger; in the completion), which no single
//     handler's error explains: nothing of it is recorded, and its events
//     run again one per transaction, each claimed alone, so that the event
//     whose own transaction fails that way is charged a failed attempt and
//     the others commit.
func (s *Store) runBatch(ctx context.Context, what string, b *DirectBatch, round roundFunc, claim string, args claimArgs,
	limit int, after LaneKey) (*DirectBatch, error) {
	singles := 0 // events left to run one per transaction
	reruns := 0
	for {
		n, single := limit, singles > 0
		if single {
			n = 1
			singles--
		}
		r := &DirectBatch{Scope: b.Scope}
		if b.recycled && b.Events == nil {
			// The first round's slice becomes b's (add).
			r.Events = s.eventsSlice(n)
		}
		err := round(ctx, what, r, claim, args(n, after)...)
		var lost *lostHandler
		var late *lateFailure
		switch {
		case errors.As(err, &lost):
			// The transaction died with its connection: only this event's
			// attempt is recorded, on another connection; the others are
			// pending again and run again below.
			e := &r.Events[lost.k]
			cause := &HandlerConnLostError{Err: lost.err}
			var recorded events.Kind
			var rerr error
			if lost.at == 0 {
				// A Go handler's: its statement lost the connection (its
				// deadline closes it), or it left it unusable; charged as a
				// claimed event's would be.
				recorded, rerr = s.recordFailed(ctx, b.Scope, e, lost.err)
			} else {
				recorded, rerr = s.recordConnLost(ctx, b.Scope, e, lost.at, cause)
			}
			switch {
			case rerr != nil:
				err = fmt.Errorf("batch of %d events of %s: %w; %w", len(r.Events), what, lost.err, rerr)
			case recorded != "":
				e.Outcome, e.Err = recorded, cause
				err = nil
			default:
				// Another transaction holds or ended the row meanwhile.
				err = nil
			}
		case errors.As(err, &late) && len(r.Events) == 1:
			// Alone in its transaction, the event is the one that fails it.
			e := &r.Events[0]
			recorded, rerr := s.recordFailed(ctx, b.Scope, e, late)
			switch {
			case rerr != nil:
				err = fmt.Errorf("batch of 1 event of %s: %w; %w", what, late, rerr)
			case recorded != "":
				e.Outcome, e.Err = recorded, late
				err = nil
			default:
				err = nil
			}
		case errors.As(err, &late):
			// Which event failed the batch is not known: each runs alone.
			singles, err = len(r.Events), nil
		}
		b.add(r)
		if err != nil {
			return b, err
		}
		if single {
			if len(r.Events) == 0 {
				return b, nil // nothing left to take
			}
			after = r.Last()
		}
		if singles > 0 {
			continue
		}
		if single || lost == nil || len(r.Events) < 2 || reruns >= maxRounds {
			return b, nil
		}
		reruns++
	}
}

// maxRounds bounds how many times a batch runs again after handlers that
// lost its connection (each time, one event's attempt is recorded).
const maxRounds = 8

// add folds a round of a batch into b.
func (b *DirectBatch) add(r *DirectBatch) {
	if b.Events == nil {
		b.Events = r.Events // the first round: nearly every batch has only one
	} else {
		b.Events = append(b.Events, r.Events...)
	}
	b.Took += r.Took
	b.HandlerTime += r.HandlerTime
	b.Timed += r.Timed
	if r.TimingErr != nil {
		b.TimingErr = r.TimingErr
	}
}

// runRound claims and runs one batch on one connection.
func (s *Store) runRound(ctx context.Context, what string, b *DirectBatch, claim string, args ...any) error {
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection for a batch of %s: %w", what, err)
	}
	defer conn.Release()
	start := time.Now()
	defer func() { b.Took = time.Since(start) }()
	cctx, cancel := context.WithTimeout(ctx, directClaimTimeout)
	err = claimBatch(cctx, conn, b, claim, args...)
	cancel()
	if err != nil || len(b.Events) == 0 {
		rollback(ctx, conn)
		if err != nil {
			err = fmt.Errorf("claim a batch of %s: %w", what, err)
		}
		return err
	}
	// Each handler is cut by statement_timeout; the deadline bounds the
	// batch should the server or the network stop answering, so its locks
	// and slots are not held forever.
	rctx, cancel := context.WithTimeout(ctx, batchBudget(b.Events))
	defer cancel()
	if err := b.run(rctx, conn, s.statements); err != nil {
		return fmt.Errorf("batch of %d events of %s: %w", len(b.Events), what, err)
	}
	return nil
}

// lostHandler: the handler of event k lost the batch's connection, while
// the server's clock read at (µs since the epoch) before it ran.
type lostHandler struct {
	k   int
	at  int64
	err error
}

func (l *lostHandler) Error() string { return "a handler lost the connection: " + l.err.Error() }
func (l *lostHandler) Unwrap() error { return l.err }

// recordConnLost records a failed attempt of e, whose handler lost its
// batch's connection, in a transaction of its own on another connection —
// unless the server started after at (its clock before the handler ran):
// then a restart ended the session, not the handler, and the attempt is not
// counted (an error, and e is pending again; so too when the server cannot be
// reached). recorded is "" when another transaction holds e's row or has
// ended it, else what the log records.
func (s *Store) recordConnLost(ctx context.Context, scope ClaimScope, e *DirectEvent, at int64,
	cause error) (recorded events.Kind, err error) {
	ctx, cancel := context.WithTimeout(ctx, directClaimTimeout)
	defer cancel()
	up, err := s.upSince(ctx, time.UnixMicro(at))
	if err == nil && !up {
		err = errors.New("the server restarted")
	}
	if err == nil {
		err = pgx.BeginFunc(ctx, s.hot, func(tx pgx.Tx) error {
			var err error
			recorded, err = recordConnLostTx(ctx, tx, scope, e, cause)
			return err
		})
	}
	if err != nil {
		return "", fmt.Errorf("record the lost connection of event %d: %w", e.ID, err)
	}
	return recorded, nil
}

// recordConnLostTx is recordConnLost's transaction, once the server was
// found up since the handler ran.
func recordConnLostTx(ctx context.Context, tx pgx.Tx, scope ClaimScope, e *DirectEvent,
	cause error) (recorded events.Kind, err error) {
	return recordFailedTx(ctx, tx, scope, e, cause)
}

// recordFailed records a failed attempt of e, whose transaction failed after
// its handler ran (late), in a transaction of its own on another connection.
// recorded is "" when another transaction holds e's row or has ended it,
// else what the log records.
func (s *Store) recordFailed(ctx context.Context, scope ClaimScope, e *DirectEvent, late error) (recorded events.Kind, err error) {
	ctx, cancel := context.WithTimeout(ctx, directClaimTimeout)
	defer cancel()
	err = pgx.BeginFunc(ctx, s.hot, func(tx pgx.Tx) error {
		var err error
		recorded, err = recordFailedTx(ctx, tx, scope, e, late)
		return err
	})
	if err != nil {
		return "", fmt.Errorf("record the failure of event %d: %w", e.ID, err)
	}
	return recorded, nil
}

// recordFailedTx locks e's row, unless another transaction holds it or has
// ended it, and records a failed attempt of it with cause: what the log
// records, events.Failed or events.GaveUp (its last attempt), or "" when
// the row was not there to record.
func recordFailedTx(ctx context.Context, tx pgx.Tx, scope ClaimScope, e *DirectEvent, cause error) (recorded events.Kind, err error) {
	var id int64
	err = tx.QueryRow(ctx, `SELECT id FROM pgrelay.queue WHERE id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND dispatched_at IS NULL
	  FOR UPDATE SKIP LOCKED`, e.ID).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if term, ok := scope.fence(); ok {
		if _, err := tx.Exec(ctx, fenceSQL, term); err != nil {
			return "", err
		}
	}
	var gaveUp []int64
	if err := tx.QueryRow(ctx, "SELECT gave_up FROM pgrelay._complete_outcomes(NULL, $1::pg_catalog.int8[], NULL, $2::pg_catalog.text[], $3::pg_catalog.text[])",
		[]int64{e.ID}, []string{kindText(events.Failed)}, []string{StorableText(cause.Error())}).Scan(&gaveUp); err != nil {
		return "", err
	}
	if len(gaveUp) > 0 {
		return events.GaveUp, nil
	}
	return events.Failed, nil
}

// lateFailure: a batch's transaction failed after its handlers, at a
// statement no handler's error explains (COMMIT running a deferred
// constraint or trigger, the completion), with a server error that is not
// the connection's, the leader fence's or a cancellation's.
type lateFailure struct {
	stmt string
	err  error
}

func (l *lateFailure) Error() string {
	return l.stmt + " failed after the handler ran: " + l.err.Error()
}
func (l *lateFailure) Unwrap() error { return l.err }

// isLate reports whether err, raised by a statement of a batch's tail (after
// its last handler) on conn, is a late failure: a server error of the
// transaction's own doing.
func isLate(ctx context.Context, conn *pgxpool.Conn, err error) bool {
	var pgErr *pgconn.PgError
	if ctx.Err() != nil || !errors.As(err, &pgErr) || connLost(conn, err) {
		return false
	}
	switch pgErr.Code {
	case prcodes.LeaseEnded, // the batch fails whole
		"57014": // cancelled (the tail runs without statement_timeout)
		return false
	}
	return true
}

// directClaimTimeout bounds a batch's claim, and is the margin of its
// deadline past its handlers' timeouts.
const directClaimTimeout = 30 * time.Second

// batchBudget is a batch's deadline: directClaimTimeout past the sum of its
// handlers' timeouts, saturating at the largest time.Duration (a timeout is
// at most 24 hours, but a batch may hold any number of events).
func batchBudget(evs []DirectEvent) time.Duration {
	budget := directClaimTimeout
	for _, e := range evs {
		if e.Timeout > math.MaxInt64-budget {
			return math.MaxInt64
		}
		budget += e.Timeout
	}
	return budget
}

func rollback(ctx context.Context, conn *pgxpool.Conn) {
	if conn.Conn().PgConn().TxStatus() != 'I' {
		_, _ = conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
	}
}

// claimBatch begins the batch's transaction and runs its claim, whose rows
// become b's events.
func claimBatch(ctx context.Context, conn *pgxpool.Conn, b *DirectBatch, claim string, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue("BEGIN")
	batch.Queue(claim, args...)
	br := conn.SendBatch(ctx, batch)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	rows, err := br.Query()
	if err != nil {
		return err
	}
	// Each row is read into its place in b.Events (a row read elsewhere
	// would be copied there, and moved to the heap first). The channel,
	// handler and kind, mostly the same on every row, are read as the
	// driver's bytes and made strings only when they differ from the row
	// before's.
	var channel, handler, kind pgtype.DriverBytes
	var timeoutMS int64
	dest := make([]any, 12)
	for rows.Next() {
		b.Events = append(b.Events, DirectEvent{})
		e := &b.Events[len(b.Events)-1]
		dest[0], dest[1], dest[2], dest[3], dest[4], dest[5] = &e.ID, &e.OriginID, &channel, &e.Lane, &e.Payload, &e.Attempt
		dest[6], dest[7], dest[8], dest[9], dest[10], dest[11] = &e.EnqueuedAt, &e.Expired, &handler, &timeoutMS, &e.MaxAttempts, &kind
		if err := rows.Scan(dest...); err != nil {
			b.Events = b.Events[:len(b.Events)-1]
			return err
		}
		e.Timeout = time.Duration(timeoutMS) * time.Millisecond
		if n := len(b.Events); n > 1 {
			prev := &b.Events[n-2]
			e.Channel, e.Handler, e.Kind = sameText(prev.Channel, channel), sameText(prev.Handler, handler), sameText(prev.Kind, kind)
		} else {
			e.Channel, e.Handler, e.Kind = string(channel), string(handler), string(kind)
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	return br.Close()
}

// sameText is last when b holds the same text, else b as a new string.
func sameText(last string, b []byte) string {
	if string(b) == last {
		return last
	}
	return string(b)
}

// run runs the claimed batch on conn, whose transaction holds its rows.
// When a handler fails, the pipeline stops there: the transaction rolls back
// to that event's savepoint, keeping its locks and the effects of the events
// before it, and a new pipeline runs the rest. No handler runs twice, and a
// failure is recorded with the batch.
func (b *DirectBatch) run(ctx context.Context, conn *pgxpool.Conn, ps *Statements) error {
	all := make([]int, len(b.Events))
	for i := range b.Events {
		if b.Events[i].Expired {
			b.Events[i].Outcome = events.Expired
		}
		all[i] = i
	}
	// replanned: the events that ran again after their handler's statement
	// went stale.
	var replanned map[int]bool
	for {
		k, done, err := b.pipeline(ctx, conn, ps, all)
		if err == nil {
			for _, i := range all {
				if b.Events[i].Outcome == "" {
					b.Events[i].Outcome = events.Succeeded
				}
			}
			return nil
		}
		var herr *HandlerError
		failure := handlerOwn
		if k >= 0 && errors.As(err, &herr) {
			failure = classifyHandlerError(conn.Conn().PgConn(), herr.Err)
		}
		if failure != handlerOwn {
			// The handler ended the session, or the server did while it ran:
			// the transaction is gone, with whatever it had done.
			b.forget(all)
			if b.clock == 0 || failure == handlerCrashOfAnother {
				return err
			}
			return &lostHandler{k: k, at: b.clock, err: herr.Err}
		}
		if k >= 0 && herr != nil {
			// The events before k ran; their effects stay in the transaction.
			for _, i := range done {
				b.Events[i].Outcome = events.Succeeded
			}
			if stalePlan(herr.Err) && !replanned[k] {
				// The connection's statement of k's handler went stale (its
				// result type changed since it was prepared); pipeline
				// forgot it. Not the event's failure: k and the events after
				// it, which the server skipped, run again in the next
				// pipeline, which prepares the handler anew. Once per event:
				// a second time is its handler's own failure.
				if replanned == nil {
					replanned = map[int]bool{}
				}
				replanned[k] = true
			} else {
				b.Events[k].Outcome, b.Events[k].Err = events.Failed, err
			}
			_, err = conn.Exec(ctx, "ROLLBACK TO SAVEPOINT pgrelay_event")
			if err == nil {
				_, err = conn.Exec(ctx, "RELEASE SAVEPOINT pgrelay_event")
			}
			if err == nil {
				continue
			}
			err = fmt.Errorf("roll back a failed handler: %w", err)
		}
		rollback(ctx, conn)
		b.forget(all)
		return err
	}
}

// connLost reports whether the batch's connection is gone after err.
func connLost(conn *pgxpool.Conn, err error) bool {
	return sessionGone(conn.Conn().PgConn(), err)
}

// forget clears the outcomes of events that were not recorded after all.
func (b *DirectBatch) forget(idx []int) {
	for _, i := range idx {
		b.Events[i].Outcome, b.Events[i].Err = "", nil
	}
}

// pipeline runs the handlers of the events of idx without an outcome, and
// records every event of idx, then commits, in one round trip on conn's open
// transaction. On a handler failure it returns that event's index, the events
// that ran before it, and a *HandlerError; on any other failure -1 and the
// error.
func (b *DirectBatch) pipeline(ctx context.Context, conn *pgxpool.Conn, ps *Statements, idx []int) (int, []int, error) {
	text := func(v string) []byte { return []byte(v) }
	var run []int
	// The completion's three arrays, as array literals.
	ids := make([]byte, 0, 1+20*len(idx))
	evs := make([]byte, 0, 1+12*len(idx))
	errs := make([]byte, 0, 1+5*len(idx))
	for j, i := range idx {
		e := &b.Events[i]
		sep := byte('{')
		if j > 0 {
			sep = ','
		}
		ids = strconv.AppendInt(append(ids, sep), e.ID, 10)
		evs, errs = append(evs, sep), append(errs, sep)
		switch e.Outcome {
		case "":
			run = append(run, i)
			evs, errs = append(evs, kindText(events.Succeeded)...), append(errs, "NULL"...)
		case events.Failed:
			evs, errs = append(evs, kindText(events.Failed)...), append(errs, arrayQuote(StorableText(e.Err.Error()))...)
		default:
			evs, errs = append(evs, kindText(e.Outcome)...), append(errs, "NULL"...)
		}
	}
	if len(idx) == 0 {
		ids, evs, errs = append(ids, '{'), append(evs, '{'), append(errs, '{')
	}
	ids, evs, errs = append(ids, '}'), append(evs, '}'), append(errs, '}')
	cs := ps.of(conn.Conn().PgConn())
	resets := cs.resets
	// The connection's slice of statements, kept from its last pipeline:
	// nothing holds a pipeline's statements once it returns.
	stmts := slices.Grow(cs.pipeline[:0], 8+2*len(resets)+len(run)*3)
	defer func() {
		clear(stmts) // keeps no payload alive
		cs.pipeline = stmts[:0]
	}()
	exec := func(sql string, args [][]byte, oids []uint32) {
		stmts = append(stmts, statement{sql: sql, args: args, oids: oids})
	}
	// The server's clock around the handlers times them.
	const now = clockSQL
	clocks := [2]int{-1, -1}
	if len(run) > 0 {
		clocks[0] = len(stmts)
		exec(now, nil, nil)
	}
	// One backing array for the handlers' parameters.
	payloads := make([][]byte, len(run))
	var channel string
	var timeoutSet int64
	for j, i := range run {
		e := &b.Events[i]
		if j > 0 && e.Channel != channel {
			// Another channel's handler comes next: nothing the handlers of
			// the one before set — settings, role — reaches it.
			for _, r := range resets {
				exec(r, nil, nil)
			}
			timeoutSet = 0
		}
		channel = e.Channel
		// The timeout is set before the savepoint, so that rolling back to
		// it keeps the timeout in force; once a channel, since a handler
		// that changes it is cut by the pipeline's backstop (readPipeline).
		timeout := max(e.Timeout.Milliseconds(), 1)
		if timeout != timeoutSet {
			exec(timeoutSQL(timeout), nil, nil)
			timeoutSet = timeout
		}
		exec(savepointSQL, nil, nil)
		// $1 is declared text, as register() checked it with PREPARE (text).
		payloads[j] = text(e.Payload)
		stmts = append(stmts, statement{sql: e.Handler, args: payloads[j : j+1 : j+1], oids: textOID,
			timeoutMS: timeout, handler: j + 1})
		exec(releaseSQL, nil, nil)
	}
	// What fails from here on is no handler's own error.
	tailAt := len(stmts)
	if clocks[0] >= 0 {
		clocks[1] = len(stmts)
		exec(now, nil, nil)
	}
	// What the handlers set reaches neither pgrelay's statements nor the
	// connection's next user; reset even when nothing runs, as an earlier
	// pipeline of this batch ran handlers.
	for _, r := range resets {
		exec(r, nil, nil)
	}
	exec(resetTimeoutSQL, nil, nil)
	if term, ok := b.Scope.fence(); ok {
		exec(fenceSQL, [][]byte{text(strconv.FormatInt(term, 10))}, int8OID)
	}
	completeAt := len(stmts)
	exec(completeSQL, [][]byte{ids, evs, errs}, completeOIDs)
	exec(commitSQL, nil, nil)
	n := len(stmts)
	pc := conn.Conn().PgConn()
	pb, err := ps.batch(ctx, pc, stmts)
	if err != nil {
		return -1, nil, err
	}
	res := readPipeline(pc.ExecBatch(ctx, pb), clocks, completeAt, backstop{pc: pc, stmts: stmts})
	failed, err := res.failed, res.err
	if err == nil && res.n != n {
		err = fmt.Errorf("expected %d results, got %d", n, res.n)
	}
	if err == nil {
		if tag := res.last.String(); tag != "COMMIT" {
			err = fmt.Errorf("the transaction ended with %s", tag)
		}
	}
	if err == nil {
		b.markGaveUp(res.gaveUp)
		if clocks[0] >= 0 {
			t0, t1 := res.clock[0], res.clock[1]
			switch {
			case res.clockErr[0] != nil || res.clockErr[1] != nil:
				b.TimingErr = fmt.Errorf("read the server's clock around the handlers: %w", errors.Join(res.clockErr[0], res.clockErr[1]))
			case t1 >= t0:
				b.HandlerTime += time.Duration(t1-t0) * time.Microsecond
				b.Timed += len(run)
			}
		}
		return -1, nil, nil
	}
	if failed >= 0 && failed < n && stmts[failed].handler > 0 {
		j := stmts[failed].handler - 1
		if res.cut {
			err = fmt.Errorf("the handler ran past its channel's timeout (%s), which a handler of its batch had changed: the Processor cancelled it: %w",
				time.Duration(stmts[failed].timeoutMS)*time.Millisecond, err)
		}
		// The server's clock before the handlers: a handler that loses the
		// connection is only to blame if the server has run since.
		b.clock = 0
		if clocks[0] >= 0 && clocks[0] < res.n && res.clockErr[0] == nil {
			b.clock = res.clock[0]
		}
		if stalePlan(err) {
			ps.forget(pc, stmts[failed].sql, stmts[failed].oids)
		}
		return run[j], run[:j], &HandlerError{Err: err}
	}
	if failed >= tailAt && failed < n && isLate(ctx, conn, err) {
		return -1, nil, &lateFailure{stmt: tailName(stmts[failed].sql), err: err}
	}
	return -1, nil, err
}

// pipelineResults is what a batch's pipeline returned, read as it arrived:
// of its thousands of results only their number, the first failure, the
// last command tag and the server's clock readings are kept.
type pipelineResults struct {
	n int // results received
	// failed and err are what firstError finds.
	failed int
	err    error
	last   pgconn.CommandTag
	// clock and clockErr are the readings of the clock statements.
	clock    [2]int64
	clockErr [2]error
	// cut: the backstop cancelled the statement that was running.
	cut bool
	// gaveUp: the ids the completion recorded as gave_up (a bigint[] the
	// server wrote, which always parses).
	gaveUp map[int64]bool
}

// readPipeline reads the results of a pipeline whose clock statements are
// at clocks (-1: none) and whose completion is at completeAt, and closes it.
// bs cancels the pipeline should its handlers run past their timeouts.
func readPipeline(mrr *pgconn.MultiResultReader, clocks [2]int, completeAt int, bs backstop) pipelineResults {
	r := pipelineResults{failed: -1}
	stop := bs.arm()
	for mrr.NextResult() {
		rr := mrr.ResultReader()
		k := -1
		for c, at := range clocks {
			if at == r.n {
				k = c
			}
		}
		rows := 0
		for rr.NextRow() {
			rows++
			if r.n == completeAt && rows == 1 {
				if v := rr.Values(); len(v) == 1 {
					r.gaveUp = parseIDs(v[0])
				}
			}
			if k >= 0 && rows == 1 {
				if v := rr.Values(); len(v) == 1 {
					r.clock[k], r.clockErr[k] = strconv.ParseInt(string(v[0]), 10, 64)
				} else {
					r.clockErr[k] = fmt.Errorf("expected one value, got %d", len(v))
				}
			}
		}
		tag, err := rr.Close()
		if k >= 0 && err == nil && rows != 1 {
			r.clockErr[k] = fmt.Errorf("expected one value, got %d rows", rows)
		}
		if err != nil && r.err == nil {
			r.failed, r.err = r.n, err
		}
		r.last = tag
		r.n++
	}
	if err := mrr.Close(); err != nil && r.err == nil {
		r.failed, r.err = firstError(nil, err)
		if r.failed == 0 {
			r.failed = r.n // a server error before the next statement's result began
		}
	}
	r.cut = stop()
	return r
}

// backstop cancels a pipeline whose handlers run past their timeouts. The
// server's statement_timeout, set once a channel in a batch, cuts each
// handler first; but a handler may change that setting for the handlers of
// its channel that follow it in the batch. The server sends a pipeline's
// results only at its end, so the Processor cannot time each handler; it
// cancels whatever statement runs once the pipeline has run for the sum of
// its handlers' timeouts and backstopMargin.
type backstop struct {
	pc    *pgconn.PgConn
	stmts []statement
}

// backstopMargin is how long past the sum of its handlers' timeouts a
// pipeline runs before the Processor cancels it.
const backstopMargin = time.Second

// arm starts the backstop of a pipeline just sent. stop ends it and reports
// whether it cancelled a statement.
func (bs backstop) arm() (stop func() bool) {
	budget := backstopMargin
	handlers := false
	for _, st := range bs.stmts {
		if st.handler > 0 {
			handlers = true
			budget += time.Duration(st.timeoutMS) * time.Millisecond
		}
	}
	if bs.pc == nil || !handlers {
		return func() bool { return false }
	}
	var fired atomic.Bool
	t := time.AfterFunc(budget, func() {
		fired.Store(true)
		ctx, cancel := context.WithTimeout(context.Background(), directClaimTimeout)
		defer cancel()
		_ = bs.pc.CancelRequest(ctx)
	})
	return func() bool {
		t.Stop()
		return fired.Load()
	}
}

// parseIDs reads a bigint[] in text form ("{1,2}") as a set.
func parseIDs(v []byte) map[int64]bool {
	t := strings.TrimSuffix(strings.TrimPrefix(string(v), "{"), "}")
	if t == "" {
		return nil
	}
	set := map[int64]bool{}
	for _, f := range strings.Split(t, ",") {
		if id, err := strconv.ParseInt(f, 10, 64); err == nil {
			set[id] = true
		}
	}
	return set
}

// markGaveUp turns the failed events whose id is in gaveUp, those the
// completion recorded as their last attempt, into events.GaveUp.
func (b *DirectBatch) markGaveUp(gaveUp map[int64]bool) {
	for i := range b.Events {
		if e := &b.Events[i]; e.Outcome == events.Failed && gaveUp[e.ID] {
			e.Outcome = events.GaveUp
		}
	}
}

// tailName names a statement of a batch's tail in a late failure.
func tailName(sql string) string {
	switch sql {
	case commitSQL:
		return "COMMIT"
	case completeSQL:
		return "recording the outcome (pgrelay._complete_outcomes)"
	}
	return sql
}

// The statements of a batch's pipeline besides its handlers.
const (
	beginSQL        = "BEGIN"
	clockSQL        = "SELECT (EXTRACT(epoch FROM pg_catalog.clock_timestamp()) OPERATOR(pg_catalog.*) 1000000::pg_catalog.numeric)::pg_catalog.int8"
	savepointSQL    = "SAVEPOINT pgrelay_event"
	releaseSQL      = "RELEASE SAVEPOINT pgrelay_event"
	resetTimeoutSQL = "SET LOCAL statement_timeout = 0"
	fenceSQL        = "SELECT pgrelay._batch_fence('leader', $1)"
	completeSQL     = "SELECT gave_up FROM pgrelay._complete_outcomes(NULL, $1, NULL, $2, $3)"
	commitSQL       = "COMMIT"
)

// timeoutSQL sets the transaction's statement_timeout to ms milliseconds.
func timeoutSQL(ms int64) string {
	return "SET LOCAL statement_timeout = " + strconv.FormatInt(ms, 10)
}

// The statements that give the next handler a clean session: every setting
// back to the value the session started with (RESET ALL keeps the
// connection's prepared statements, which DISCARD ALL would drop), and the
// role. A superuser login also resets its session authorization (which only
// a superuser's handler can change), before the role.
const (
	resetAllSQL  = "RESET ALL"
	resetAuthSQL = "RESET SESSION AUTHORIZATION"
	resetRoleSQL = "RESET ROLE"
)

var (
	sessionResets      = []string{resetAllSQL, resetRoleSQL}
	superuserResets    = []string{resetAllSQL, resetAuthSQL, resetRoleSQL}
	resetStatementsSQL = []statement{{sql: resetAllSQL}, {sql: resetAuthSQL}, {sql: resetRoleSQL}}
)

// batchStatements are the statements Statements.Warm prepares.
var batchStatements = append([]statement{
	{sql: clockSQL}, {sql: savepointSQL}, {sql: releaseSQL}, {sql: resetTimeoutSQL},
	{sql: fenceSQL, oids: int8OID}, {sql: completeSQL, oids: completeOIDs}, {sql: commitSQL},
}, resetStatementsSQL...)

var (
	textOID      = []uint32{pgtype.TextOID}
	int8OID      = []uint32{pgtype.Int8OID}
	completeOIDs = []uint32{pgtype.Int8ArrayOID, pgtype.TextArrayOID, pgtype.TextArrayOID}
)

// statement is one statement of a pipeline, its parameters in text format.
type statement struct {
	sql  string
	args [][]byte
	oids []uint32
	// timeoutMS bounds the statement's preparation (0: no bound).
	timeoutMS int64
	// handler is 1 + the index among the pipeline's handlers of the event
	// whose handler this statement is, 0 when it is none.
	handler int
}

// stalePlan reports whether err is the server refusing a prepared
// statement whose result type changed under it: SQLSTATE 0A000
// (feature_not_supported, which other errors share) with the server's
// message, or, as a server whose lc_messages is not English translates the
// message, raised where the server revalidates a cached plan.
func stalePlan(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "0A000" &&
		(pgErr.Message == "cached plan must not change result type" || pgErr.Routine == "RevalidateCachedQuery")
}

// arrayQuote quotes s as an element of a PostgreSQL array literal.
func arrayQuote(s string) string {
	return `"` + strings.NewReplacer(`\`, `\\`, `"`, `\"`).Replace(s) + `"`
}

// firstError finds which statement of a pipeline failed: the one whose result
// holds an error, or, for a server error raised before a statement's result
// began (a handler failing while it is planned, as 1/0 does), the statement
// after the last result. -1 when it is not a statement's error — a
// connection that died without a word (its backend killed) among them: the
// server sends a pipeline's results when it ends or its buffer fills, so the
// results received do not say which statement was running.
func firstError(results []*pgconn.Result, err error) (int, error) {
	for j, r := range results {
		if r.Err != nil {
			return j, r.Err
		}
	}
	var pgErr *pgconn.PgError
	if err != nil && errors.As(err, &pgErr) {
		return len(results), err
	}
	return -1, err
}
