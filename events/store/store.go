// Package store holds every SQL statement the Processor and the pgrelay
// commands send to PostgreSQL (pgx only), but the catalog checks only
// `pgrelay doctor` makes and the migrations' own. Functions that take a
// Querier run on any session; the Store's methods on its pools. Two pools
// keep hot-path work (claims, handlers, completions) apart from background
// work (heartbeats, rescue, trimming, statistics), so a slow background
// query never takes a connection a claim needs.
package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/prcodes"
)

// Querier is what the store's functions need of a session: a *pgx.Conn, a
// pool, a pooled connection or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Store runs pgrelay's SQL.
type Store struct {
	hot *pgxpool.Pool
	bg  *pgxpool.Pool
	// statements: the statements each hot connection has prepared.
	statements *Statements
	// upChecks bounds the sessions upSince opens at once.
	upChecks chan struct{}
	// events: the events slices of finished sql batches (Recycle).
	events sync.Pool
}

// New returns a Store over a hot-path pool and a background pool (bg nil:
// the hot pool for both). The hot connections' prepared statements are kept
// in st (nil: a Store of its own), whose Warm the hot pool should run on each
// new connection.
func New(hot, bg *pgxpool.Pool, st *Statements) *Store {
	if bg == nil {
		bg = hot
	}
	if st == nil {
		st = &Statements{}
	}
	return &Store{hot: hot, bg: bg, statements: st, upChecks: make(chan struct{}, maxUpChecks)}
}

// Hot is the hot-path pool.
func (s *Store) Hot() *pgxpool.Pool { return s.hot }

// Background is the background pool.
func (s *Store) Background() *pgxpool.Pool { return s.bg }

// Claimed is one queue row a Processor claimed, with its channel's settings.
type Claimed struct {
	ID           int64
	OriginID     int64
	Channel      string
	Payload      string
	Attempt      int
	EnqueuedAt   time.Time
	DispatchedAt time.Time // the claim's time; with the processor id it identifies the claim
	Expired      bool      // past expires_at at claim time: record, do not run
	Kind         string
	Handler      string
	Mode         string // the channel's concurrency_mode
	Timeout      time.Duration
	MaxAttempts  int
	// Traceparent is the producer's trace context, read only by a tracing
	// Processor (Traceparents); "" for none.
	Traceparent string
}

// RateWait is a rate-limited channel whose window a claim found full (its
// own starts included) while the channel still has rows for the Processor:
// the window has room again Wait after the claim answered. Nothing but a
// claim at that time, or the poll, starts those rows.
type RateWait struct {
	Channel string
	Wait    time.Duration
}

// Ready is a channel with rows ready for a direct batch (Claim): a 'none'
// channel of kind sql or go, or "" (kind sql) for the lanes of the
// serialised sql channels.
type Ready struct {
	Channel string
	Kind    string
}

// Claim claims up to limit ready rows for processor proc (see pgrelay._claim).
// Only channels of the given kinds are claimed. In leader mode, scope.Term > 0
// means this node believes it holds the lease with that term; the claim checks
// it. With direct, the sql channels are left to batches (RunDirect,
// RunLanes); so are the 'none' go channels of the kinds directGo (GoKind of
// the HandleTx handlers: RunGoDirect). ready lists the 'none' channels of
// those with rows ready, and "" when a serialised sql channel has a lane
// ready, in the same round trip.
func (s *Store) Claim(ctx context.Context, proc int64, scope ClaimScope, limit int, kinds []string,
	direct bool, directGo []string) (claimed []Claimed, ready []Ready, waits []RateWait, err error) {
	leader, term := scope.args()
	var readyArgs []any
	if direct || len(directGo) > 0 {
		kinds := directGo
		if direct {
			kinds = append([]string{"sql"}, directGo...)
		}
		readyArgs = []any{scope.Mode, leader, kinds}
	}
	claimed, ready, waits, err = s.claim(ctx, `SELECT * FROM pgrelay._claim($1::pg_catalog.int8, $2::pg_catalog.text, $3::pg_catalog.bool,
		$4::pg_catalog.int4, $5::pg_catalog.text[], $6::pg_catalog.int8, $7::pg_catalog.bool, $8::pg_catalog.text[])`,
		[]any{proc, scope.Mode, leader, limit, kinds, term, direct, directGo}, readyArgs)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("claim up to %d rows for processor %d: %w", limit, proc, err)
	}
	return claimed, ready, waits, nil
}

// ClaimChannel claims, as Claim does, up to limit ready rows of channel
// alone, when Claim would visit it and it is a 'none' channel (see
// pgrelay._claim_channel); none otherwise. A notification named the channel:
// its events start without waiting for a claim of every channel.
func (s *Store) ClaimChannel(ctx context.Context, proc int64, scope ClaimScope, limit int, channel string,
	kinds []string, direct bool, directGo []string) ([]Claimed, []RateWait, error) {
	leader, term := scope.args()
	claimed, _, waits, err := s.claim(ctx, `SELECT * FROM pgrelay._claim_channel($1::pg_catalog.int8, $2::pg_catalog.text, $3::pg_catalog.bool,
		$4::pg_catalog.int4, $5::pg_catalog.text, $6::pg_catalog.text[], $7::pg_catalog.int8, $8::pg_catalog.bool,
		$9::pg_catalog.text[])`,
		[]any{proc, scope.Mode, leader, limit, channel, kinds, term, direct, directGo}, nil)
	if err != nil {
		return nil, nil, fmt.Errorf("claim up to %d rows of channel %s for processor %d: %w", limit, channel, proc, err)
	}
	return claimed, waits, nil
}

// claim runs the claim statement sql (rows of scanClaimed, and the rate
// waits it reports) and, unless
// readyArgs is nil, pgrelay._ready_direct with them, in one implicit
// transaction, and returns the claimed rows and the ready channels once it
// committed. The commit need not wait for the disk: a claim lost in a crash
// leaves its rows pending, and whatever the claim leads to commits later,
// durably, which writes the claim's commit to disk first.
func (s *Store) claim(ctx context.Context, sql string, args, readyArgs []any) ([]Claimed, []Ready, []RateWait, error) {
	b := &pgx.Batch{}
	b.Queue("SELECT pg_catalog.set_config('synchronous_commit', 'off', true)")
	b.Queue(sql, args...)
	if readyArgs != nil {
		b.Queue("SELECT channel, kind FROM pgrelay._ready_direct($1::pg_catalog.text, $2::pg_catalog.bool, $3::pg_catalog.text[])",
			readyArgs...)
	}
	br := s.hot.SendBatch(ctx, b)
	defer br.Close()
	if _, err := br.Exec(); err != nil {
		return nil, nil, nil, err
	}
	rows, err := br.Query()
	if err != nil {
		return nil, nil, nil, err
	}
	var claimed []Claimed
	var waits []RateWait
	for rows.Next() {
		c, wait, err := scanClaimed(rows)
		if err != nil {
			rows.Close()
			return nil, nil, nil, err
		}
		if wait != nil {
			waits = append(waits, *wait)
		} else {
			claimed = append(claimed, c)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, nil, nil, err
	}
	var ready []Ready
	if readyArgs != nil {
		rows, err := br.Query()
		if err == nil {
			ready, err = pgx.CollectRows(rows, pgx.RowToStructByPos[Ready])
		}
		if err != nil {
			// The claim rolls back with it.
			return nil, nil, nil, fmt.Errorf("list channels ready for batches: %w", err)
		}
	}
	// The claim is only made once its transaction commits, at the end.
	if err := br.Close(); err != nil {
		return nil, nil, nil, err
	}
	return claimed, ready, waits, nil
}

// scanClaimed scans a row of pgrelay._claim (or _claim_channel): a claimed
// row, or (a NULL id) a rate-limited channel's wait.
func scanClaimed(r pgx.Rows) (Claimed, *RateWait, error) {
	var c Claimed
	if r.RawValues()[0] == nil {
		var w RateWait
		var ms int64
		// The other columns are NULL or the channel's: skipped.
		err := r.Scan(nil, nil, &w.Channel, nil, nil, nil, nil, nil, nil, nil, nil, nil, nil, &ms)
		w.Wait = time.Duration(ms) * time.Millisecond
		return c, &w, err
	}
	var timeoutMS int64
	err := r.Scan(&c.ID, &c.OriginID, &c.Channel, &c.Payload, &c.Attempt, &c.EnqueuedAt,
		&c.DispatchedAt, &c.Expired, &c.Kind, &c.Handler, &c.Mode, &timeoutMS, &c.MaxAttempts, nil)
	c.Timeout = time.Duration(timeoutMS) * time.Millisecond
	return c, nil, err
}

// Outcome ends one claim.
type Outcome struct {
	ID        int64
	ClaimedAt time.Time
	// Event: events.Succeeded, events.Failed (retried or given up),
	// events.GaveUp, events.Expired, or events.Release (never started: back
	// to pending, no log row).
	Event events.Kind
	// Error is the failure's text, from whatever failed (a server's reply):
	// Complete stores it through StorableText.
	Error string
	// RetryAfter, for a failed outcome (a Go handler's RetryAfter), makes
	// its retry due after this long instead of the channel's backoff; it
	// needs OriginID, the event's origin id. 0: the backoff.
	RetryAfter time.Duration
	OriginID   int64
	// SnoozeFor, for a snoozed outcome (a Go handler's Snooze), is when
	// the event is due again; no attempt is spent (pgrelay._snooze).
	SnoozeFor time.Duration
}

// kindText is outcome k as the text pgrelay._complete takes: the one place
// an outcome becomes a string.
func kindText(k events.Kind) string { return string(k) }

// Recorded is what a completion recorded: how many outcomes still matched
// a live claim (or a row the batch holds), and the ids of those the log
// records as gave_up. Whether a failed attempt gives up is decided there,
// by the channel's max_attempts when it is recorded (pgrelay._complete_outcomes),
// never by the value the event was claimed with.
type Recorded struct {
	N      int
	GaveUp map[int64]bool
}

// Complete applies a batch of outcomes of processor proc's claims in one
// transaction and says what it recorded.
func (s *Store) Complete(ctx context.Context, proc int64, outs []Outcome) (Recorded, error) {
	if len(outs) == 0 {
		return Recorded{}, nil
	}
	r, err := complete(ctx, s.hot, &proc, outs)
	if err != nil {
		return Recorded{}, fmt.Errorf("complete %d outcomes of processor %d: %w", len(outs), proc, err)
	}
	return r, nil
}

// gaveUpSet is the set of the ids in a gave_up array.
func gaveUpSet(ids []int64) map[int64]bool {
	if len(ids) == 0 {
		return nil
	}
	set := make(map[int64]bool, len(ids))
	for _, id := range ids {
		set[id] = true
	}
	return set
}

// batchQuerier is a Querier that also sends batches (a pool, a connection).
type batchQuerier interface {
	Querier
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// complete records outs with pgrelay._complete_outcomes, and moves the
// retries of those with a RetryAfter; snoozed outcomes go to
// pgrelay._snooze instead, in the same batch. proc nil: the rows of a
// direct batch, locked in q's transaction.
func complete(ctx context.Context, q batchQuerier, proc *int64, outs []Outcome) (Recorded, error) {
	var snoozed []Outcome
	if slices.ContainsFunc(outs, func(o Outcome) bool { return o.Event == events.Snoozed }) {
		rest := make([]Outcome, 0, len(outs))
		for _, o := range outs {
			if o.Event == events.Snoozed {
				snoozed = append(snoozed, o)
			} else {
				rest = append(rest, o)
			}
		}
		outs = rest
	}
	ids := make([]int64, len(outs))
	at := make([]time.Time, len(outs))
	evs := make([]string, len(outs))
	errs := make([]*string, len(outs))
	for i, o := range outs {
		ids[i], at[i], evs[i] = o.ID, o.ClaimedAt, kindText(o.Event)
		if o.Error != "" {
			e := StorableText(o.Error)
			errs[i] = &e
		}
	}
	const completeSQL = "SELECT done, gave_up FROM pgrelay._complete_outcomes($1::pg_catalog.int8, $2::pg_catalog.int8[], $3::pg_catalog.timestamptz[], $4::pg_catalog.text[], $5::pg_catalog.text[])"
	var n int
	var gaveUp []int64
	var delayed, origins []int64
	var delays []time.Duration
	for _, o := range outs {
		if o.Event == events.Failed && o.RetryAfter > 0 {
			delayed, origins, delays = append(delayed, o.ID), append(origins, o.OriginID), append(delays, o.RetryAfter)
		}
	}
	if len(delayed) == 0 && len(snoozed) == 0 {
		err := q.QueryRow(ctx, completeSQL, proc, ids, at, evs, errs).Scan(&n, &gaveUp)
		return Recorded{N: n, GaveUp: gaveUpSet(gaveUp)}, err
	}
	// The retries _complete enqueues are moved in the same (implicit)
	// transaction: no claim sees them due after the backoff in between.
	b := &pgx.Batch{}
	if len(outs) > 0 {
		b.Queue(completeSQL, proc, ids, at, evs, errs).QueryRow(func(r pgx.Row) error { return r.Scan(&n, &gaveUp) })
	}
	if len(delayed) > 0 {
		b.Queue("SELECT pgrelay._retry_after($1::pg_catalog.int8[], $2::pg_catalog.int8[], $3::pg_catalog.interval[])",
			delayed, origins, delays)
	}
	var sn int
	var sGaveUp []int64
	if len(snoozed) > 0 {
		sids := make([]int64, len(snoozed))
		sat := make([]time.Time, len(snoozed))
		sfor := make([]time.Duration, len(snoozed))
		for i, o := range snoozed {
			sids[i], sat[i], sfor[i] = o.ID, o.ClaimedAt, o.SnoozeFor
		}
		b.Queue("SELECT done, gave_up FROM pgrelay._snooze($1::pg_catalog.int8, $2::pg_catalog.int8[], $3::pg_catalog.timestamptz[], $4::pg_catalog.interval[])",
			proc, sids, sat, sfor).QueryRow(func(r pgx.Row) error { return r.Scan(&sn, &sGaveUp) })
	}
	if err := q.SendBatch(ctx, b).Close(); err != nil {
		return Recorded{}, err
	}
	return Recorded{N: n + sn, GaveUp: gaveUpSet(append(gaveUp, sGaveUp...))}, nil
}

// ErrClaimLost means the claim was taken back (rescued) before the handler's
// transaction could complete it; the transaction was rolled back.
var ErrClaimLost = errors.New("store: claim was taken back before completion")

// IsConnError reports whether err means the database connection failed (or
// the server is shutting down) rather than a statement failing: the attempt
// did not really happen.
func IsConnError(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case strings.HasPrefix(pgErr.Code, "08"), // connection exception
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, crash, cannot connect now
			return true
		}
		return false
	}
	var netErr net.Error
	var connectErr *pgconn.ConnectError
	return errors.As(err, &netErr) || errors.As(err, &connectErr) || pgconn.SafeToRetry(err) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "conn busy")
}

// RunSQL runs a sql channel's handler for c with $1 = payload, under the
// channel's timeout as statement_timeout, and completes the claim as
// succeeded in the same transaction: the handler's effects and the completion
// commit together or not at all. BEGIN, the handler, the completion and
// COMMIT go to the server in one round trip; when any of them fails the
// COMMIT turns into a ROLLBACK. They run as prepared statements, as a batch's
// do; a handler whose result type changed since it was prepared on the
// connection (the server refuses it before it runs) is prepared again and the
// event runs again, in the same attempt.
func (s *Store) RunSQL(ctx context.Context, proc int64, c Claimed) error {
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection for event %d: %w", c.ID, err)
	}
	defer conn.Release()
	outer := ctx // without the handler's deadline
	ctx, cancel := context.WithTimeout(ctx, c.Timeout+time.Second)
	defer cancel()
	pc := conn.Conn().PgConn()
	for replanned := false; ; replanned = true {
		stale, err := s.runSQL(ctx, outer, pc, proc, c)
		if stale == nil || replanned {
			return err
		}
		s.statements.forget(pc, stale.sql, stale.oids)
	}
}

// succeedSQL completes a claimed event in its handler's transaction.
const succeedSQL = "SELECT pgrelay._succeed($1::pg_catalog.int8, $2::pg_catalog.int8, $3::pg_catalog.timestamptz)"

var succeedOIDs = []uint32{pgtype.Int8OID, pgtype.Int8OID, pgtype.TimestamptzOID}

// runSQL is one run of RunSQL on pc. stale is the statement the server
// refused as stale (the transaction rolled back), nil otherwise.
func (s *Store) runSQL(ctx, outer context.Context, pc *pgconn.PgConn, proc int64, c Claimed) (stale *statement, err error) {
	ms := max(c.Timeout.Milliseconds(), 1)
	text := func(v string) []byte { return []byte(v) }
	stmts := []statement{
		{sql: beginSQL},
		{sql: timeoutSQL(ms)},
		// $1 is declared text, as register() checked it with PREPARE
		// (text): a handler such as "SELECT f($1) WHERE $1 IS NOT NULL"
		// needs the type.
		{sql: c.Handler, args: [][]byte{text(c.Payload)}, oids: textOID, timeoutMS: ms, handler: 1},
	}
	const handlerAt = 2
	// What the handler set (settings, its role) is reset before the
	// completion and the commit: the connection goes back to the pool as it
	// came. (A transaction that fails takes the handler's settings with it.)
	for _, r := range s.statements.of(pc).resets {
		stmts = append(stmts, statement{sql: r})
	}
	stmts = append(stmts, statement{sql: resetTimeoutSQL},
		statement{sql: succeedSQL, args: [][]byte{text(strconv.FormatInt(proc, 10)), text(strconv.FormatInt(c.ID, 10)),
			text(c.DispatchedAt.UTC().Format(time.RFC3339Nano))}, oids: succeedOIDs},
		statement{sql: commitSQL})
	// The pipeline's results are those of stmts[off:]: a BEGIN run on its
	// own comes first (preparing a statement needs a transaction).
	pb, off, err := s.statements.beginBatch(ctx, pc, stmts)
	failed := -1 // which statement failed
	var results []*pgconn.Result
	if err == nil {
		results, err = pc.ExecBatch(ctx, pb).ReadAll()
		if failed, err = firstError(results, err); failed >= 0 {
			failed += off
		}
	}
	if err == nil && off+len(results) != len(stmts) {
		err = fmt.Errorf("expected %d results, got %d", len(stmts)-off, len(results))
	}
	if err != nil {
		// An error aborts the rest of the pipeline: roll back whatever is
		// open before the connection goes back to the pool.
		if pc.TxStatus() != 'I' {
			_ = execSimple(context.WithoutCancel(ctx), pc, "ROLLBACK")
		}
		var pgErr *pgconn.PgError
		switch {
		case failed >= 0 && failed <= handlerAt && stalePlan(err):
			// Refused before the handler ran: nothing of this run is left.
			return &stmts[failed], fmt.Errorf("run handler of event %d: %w", c.ID, err)
		case errors.As(err, &pgErr) && pgErr.Code == prcodes.ClaimTakenBack:
			return nil, ErrClaimLost
		case failed == handlerAt:
			switch classifyHandlerError(pc, err) {
			case handlerOwn:
				return nil, &HandlerError{Err: err}
			case handlerSessionEnded:
				// The handler's doing (an attempt) unless the server
				// restarted since the claim.
				qctx, cancel := context.WithTimeout(outer, 5*time.Second)
				up, uerr := s.upSince(qctx, c.DispatchedAt)
				cancel()
				if uerr != nil {
					// Not knowing, the attempt is not counted: the event is
					// released, as after a restart.
					return nil, fmt.Errorf("run handler of event %d: %w (%w)", c.ID, err, uerr)
				}
				if up {
					return nil, &HandlerError{Err: &HandlerConnLostError{Err: err}}
				}
			}
		}
		return nil, fmt.Errorf("run handler of event %d: %w", c.ID, err)
	}
	if tag := results[len(results)-1].CommandTag.String(); tag != "COMMIT" {
		return nil, fmt.Errorf("run handler of event %d: the transaction ended with %s", c.ID, tag)
	}
	return nil, nil
}

// upSince reports whether the server has been up since at, without a
// restart: a session that ended after at was not ended by a restart.
//
// It asks on a new session, never on a pooled one. A server that shuts down
// refuses new sessions from the moment the shutdown begins, then ends its
// sessions one after the other: a pooled session it has not reached yet
// still answers, with the start time of the server that is going away, and
// would blame the handler for a session the shutdown ended. A new session is
// refused during the shutdown (an error: the attempt is not counted) and,
// after the restart, reports the new server's start time.
func (s *Store) upSince(ctx context.Context, at time.Time) (bool, error) {
	select {
	case s.upChecks <- struct{}{}:
		defer func() { <-s.upChecks }()
	case <-ctx.Done():
		return false, fmt.Errorf("ask the server since when it runs: %w", ctx.Err())
	}
	cc := s.hot.Config().ConnConfig.Copy()
	PinSearchPath(cc)
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return false, fmt.Errorf("ask the server since when it runs: %w", err)
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var up bool
	if err := conn.QueryRow(ctx, "SELECT pg_catalog.pg_postmaster_start_time() OPERATOR(pg_catalog.<) $1::pg_catalog.timestamptz", at).Scan(&up); err != nil {
		return false, fmt.Errorf("ask the server since when it runs: %w", err)
	}
	return up, nil
}

// maxUpChecks bounds the sessions upSince opens at once: after a restart
// every handler that was running asks.
const maxUpChecks = 4

// HandlerError is an error raised by a handler's own SQL, as opposed to a
// failure to talk to the database.
type HandlerError struct{ Err error }

func (e *HandlerError) Error() string { return e.Err.Error() }
func (e *HandlerError) Unwrap() error { return e.Err }

// HandlerConnLostError is a handler's statement losing its database
// connection while the server stayed up: the server ended the session while
// the handler ran, with the server's error (the handler ended it itself, or
// an administrator terminated it). Unlike a connection lost outside the
// handler, or to a server restart, it costs the event an attempt, so that a
// handler that always does it gives up instead of running forever.
type HandlerConnLostError struct{ Err error }

func (e *HandlerConnLostError) Error() string {
	return "database connection lost while the handler ran: " + e.Err.Error()
}
func (e *HandlerConnLostError) Unwrap() error { return e.Err }

// IsHandlerConnLost reports whether err is a HandlerConnLostError.
func IsHandlerConnLost(err error) bool {
	var h *HandlerConnLostError
	return errors.As(err, &h)
}

// ProcessorInfo describes a running Processor instance.
type ProcessorInfo struct {
	Mode     string
	Hostname string
	PID      int
	Version  string
}

// RecordNode records the node id of this Processor's sessions as the one
// producers stamp (pgrelay._record_node()); returns the id recorded before.
func (s *Store) RecordNode(ctx context.Context) (previous int, err error) {
	var prev int32
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._record_node()").Scan(&prev); err != nil {
		return 0, fmt.Errorf("record this node's id: %w", err)
	}
	return int(prev), nil
}

// WakeHints is what a wake-up names each of channels by
// (pgrelay._wake_hint: a digest with this node's secret key), by channel.
func (s *Store) WakeHints(ctx context.Context, channels []string) (map[string]string, error) {
	rows, err := s.bg.Query(ctx, `SELECT c.channel, pgrelay._wake_hint(c.channel)
		FROM pg_catalog.unnest($1::pg_catalog.text[]) AS c(channel)`, channels)
	if err != nil {
		return nil, fmt.Errorf("read the wake hints of %d channels: %w", len(channels), err)
	}
	hints := make(map[string]string, len(channels))
	for rows.Next() {
		var ch string
		var hint *string
		if err := rows.Scan(&ch, &hint); err != nil {
			return nil, fmt.Errorf("read the wake hints: %w", err)
		}
		if hint != nil {
			hints[ch] = *hint
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("read the wake hints of %d channels: %w", len(channels), err)
	}
	return hints, nil
}

// FlowLimited is the channels with a max_in_flight: an event of theirs that
// ends may let the next one start.
func (s *Store) FlowLimited(ctx context.Context) (map[string]struct{}, error) {
	rows, err := s.bg.Query(ctx, `SELECT c.channel FROM pgrelay.channels c WHERE c.max_in_flight IS NOT NULL`)
	if err != nil {
		return nil, fmt.Errorf("read the channels with a max_in_flight: %w", err)
	}
	channels, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("read the channels with a max_in_flight: %w", err)
	}
	out := make(map[string]struct{}, len(channels))
	for _, ch := range channels {
		out[ch] = struct{}{}
	}
	return out, nil
}

// StartProcessor registers a Processor instance and returns its id and the
// node id its sessions run as.
func (s *Store) StartProcessor(ctx context.Context, info ProcessorInfo) (id int64, node int, err error) {
	err = s.bg.QueryRow(ctx, "SELECT pgrelay._processor_start($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.int4, $4::pg_catalog.text), pgrelay._this_node()",
		info.Mode, StorableText(info.Hostname), info.PID, StorableText(info.Version)).Scan(&id, &node)
	if err != nil {
		return 0, 0, fmt.Errorf("register processor (mode %s): %w", info.Mode, err)
	}
	return id, node, nil
}

// Heartbeat marks the instance alive; alive is false when its row had been
// removed (it was presumed dead and its claims taken back).
func (s *Store) Heartbeat(ctx context.Context, proc int64, info ProcessorInfo) (alive bool, err error) {
	err = s.bg.QueryRow(ctx, "SELECT pgrelay._heartbeat($1::pg_catalog.int8, $2::pg_catalog.text, $3::pg_catalog.text, $4::pg_catalog.int4, $5::pg_catalog.text)",
		proc, info.Mode, StorableText(info.Hostname), info.PID, StorableText(info.Version)).Scan(&alive)
	if err != nil {
		return false, fmt.Errorf("heartbeat of processor %d: %w", proc, err)
	}
	return alive, nil
}

// StopProcessor releases whatever the instance still holds and removes it.
func (s *Store) StopProcessor(ctx context.Context, proc int64) (released int, err error) {
	err = s.bg.QueryRow(ctx, "SELECT pgrelay._processor_stop($1::pg_catalog.int8)", proc).Scan(&released)
	if err != nil {
		return 0, fmt.Errorf("unregister processor %d: %w", proc, err)
	}
	return released, nil
}

// Rescue takes back the claims of dead instances of this node and of claims
// held past their lease; returns how many.
func (s *Store) Rescue(ctx context.Context, proc int64, deadAfter, leaseGrace time.Duration) (int, error) {
	var n int
	err := s.bg.QueryRow(ctx, "SELECT pgrelay._rescue($1::pg_catalog.int8, $2::pg_catalog.interval, $3::pg_catalog.interval)", proc, deadAfter, leaseGrace).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("rescue claims (processor %d): %w", proc, err)
	}
	return n, nil
}

// Trimmed is what one call of TrimLog deleted.
type Trimmed struct {
	// Deleted is every row deleted, Dropped among them.
	Deleted int
	// Dropped: rows deleted although the publisher of their node had not
	// published them (past the cap), with the smallest and largest id.
	Dropped                   int
	DroppedFirst, DroppedLast int64
}

// TrimLog deletes up to batch log rows older than olderThan; rows the NATS
// publisher of their node has not published only when older than
// unpublishedMax (recorded in pgrelay.log_dropped).
func (s *Store) TrimLog(ctx context.Context, olderThan, unpublishedMax time.Duration, batch int) (Trimmed, error) {
	var t Trimmed
	var first, last *int64
	err := s.bg.QueryRow(ctx, `SELECT deleted, dropped, dropped_first, dropped_last
		FROM pgrelay._trim_log($1::pg_catalog.interval, $2::pg_catalog.int4, $3::pg_catalog.interval)`, olderThan, batch, unpublishedMax).
		Scan(&t.Deleted, &t.Dropped, &first, &last)
	if err != nil {
		return Trimmed{}, fmt.Errorf("trim log older than %s (unpublished: %s): %w", olderThan, unpublishedMax, err)
	}
	if first != nil && last != nil {
		t.DroppedFirst, t.DroppedLast = *first, *last
	}
	return t, nil
}

// Lease is the leader lease as this node sees it after one election step.
type Lease struct {
	Leader     *int
	Term       int64
	LeaseUntil *time.Time
	Mine       bool // this node holds it
	Taken      bool // this step took it (it must settle before use)
}

// LeaderNode is the holder's node id, or -1 when no node holds the lease.
func (l Lease) LeaderNode() int {
	if l.Leader == nil {
		return -1
	}
	return *l.Leader
}

// LeaseStep renews or takes the leader lease for duration (see
// pgrelay._lease).
func (s *Store) LeaseStep(ctx context.Context, duration time.Duration) (Lease, error) {
	var l Lease
	var term *int64
	err := s.bg.QueryRow(ctx, "SELECT leader_node, term, lease_until, mine, taken FROM pgrelay._lease($1::pg_catalog.interval)", duration).
		Scan(&l.Leader, &term, &l.LeaseUntil, &l.Mine, &l.Taken)
	if err != nil {
		return Lease{}, fmt.Errorf("leader lease step: %w", err)
	}
	if term != nil {
		l.Term = *term
	}
	return l, nil
}

// LeaseRelease gives up the lease of term, if this node still holds it.
func (s *Store) LeaseRelease(ctx context.Context, term int64) error {
	if _, err := s.bg.Exec(ctx, "SELECT pgrelay._lease_release($1::pg_catalog.int8)", term); err != nil {
		return fmt.Errorf("release leader lease (term %d): %w", term, err)
	}
	return nil
}

// Adopt takes over the unrestricted work of dead nodes when this node is the
// one to do it (see pgrelay._adopt); returns the rows adopted.
func (s *Store) Adopt(ctx context.Context, deadAfter time.Duration) (int, error) {
	var n int
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._adopt($1::pg_catalog.interval)", deadAfter).Scan(&n); err != nil {
		return 0, fmt.Errorf("adopt dead nodes' work: %w", err)
	}
	return n, nil
}

// ChannelStats is one row of pgrelay.queue_stats().
type ChannelStats struct {
	Channel           string
	Pending           int64
	PendingRestricted int64
	PendingEstimated  bool // pending is the planner's estimate (over 100 000 rows)
	InFlight          int64
	Retrying          int64
	OldestPending     *time.Time
	Kind              string
	Mode              string
	Paused            bool
	// The channel's flow settings (pgrelay.channels): its default
	// priority, its max_in_flight and its rate limit (nil: none).
	Priority    int
	MaxInFlight *int
	RateLimit   *int
	RatePeriod  *time.Duration
}

// QueueStats returns pgrelay.queue_stats().
func (s *Store) QueueStats(ctx context.Context) ([]ChannelStats, error) {
	return QueueStats(ctx, s.bg)
}

// QueueStats returns pgrelay.queue_stats() from any connection.
func QueueStats(ctx context.Context, q Querier) ([]ChannelStats, error) {
	rows, err := q.Query(ctx, `SELECT s.channel, s.pending, s.pending_restricted, s.in_flight, s.retrying,
		s.oldest_pending, s.kind, s.concurrency_mode, s.paused, s.pending_estimated,
		COALESCE(c.priority, 0::pg_catalog.int2), c.max_in_flight, c.rate_limit, c.rate_period
		FROM pgrelay.queue_stats() s
		LEFT JOIN pgrelay.channels c ON c.channel OPERATOR(pg_catalog.=) s.channel`)
	if err != nil {
		return nil, fmt.Errorf("queue_stats: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ChannelStats, error) {
		var c ChannelStats
		err := r.Scan(&c.Channel, &c.Pending, &c.PendingRestricted, &c.InFlight, &c.Retrying,
			&c.OldestPending, &c.Kind, &c.Mode, &c.Paused, &c.PendingEstimated,
			&c.Priority, &c.MaxInFlight, &c.RateLimit, &c.RatePeriod)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("queue_stats: %w", err)
	}
	return out, nil
}
