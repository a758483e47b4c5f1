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

// GoKind is what a Processor passes in the claim's kinds for its Go handler
// name: "go:" + name (pgrelay._claim_kind), so that it is offered the events
// of the go channels naming it and no other.
func GoKind(name string) string { return "go:" + name }

// RunGoTx runs fn, a Go handler of event c, in a transaction that completes
// the claim as succeeded (pgrelay._succeed) when fn returns nil: what fn
// wrote through tx commits with the event's success, or not at all. fn runs
// under timeout, counted from when the connection is acquired (waiting for
// one is not the handler's time). An error of fn is returned as a
// HandlerError, the transaction rolled back; ErrClaimLost when the claim was
// taken back before the commit.
func (s *Store) RunGoTx(ctx context.Context, proc int64, c Claimed, timeout time.Duration,
	fn func(ctx context.Context, tx pgx.Tx) error) error {
	return s.RunGoTxBatch(ctx, proc, []Claimed{c}, timeout, fn)
}

// RunGoTxBatch is RunGoTx for several claims: fn's writes and the success of
// every claim commit together, or nothing does. ErrClaimLost when one of the
// claims was taken back (which, the error does not say: the others are
// still held).
func (s *Store) RunGoTxBatch(ctx context.Context, proc int64, cs []Claimed, timeout time.Duration,
	fn func(ctx context.Context, tx pgx.Tx) error) error {
	what := fmt.Sprintf("event %d", cs[0].ID)
	if len(cs) > 1 {
		what = fmt.Sprintf("%d events (%d, ...)", len(cs), cs[0].ID)
	}
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("acquire a connection for %s: %w", what, err)
	}
	defer conn.Release()
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tx, err := conn.Begin(hctx)
	if err != nil {
		return fmt.Errorf("begin the transaction of %s: %w", what, err)
	}
	// Rolls back whatever did not commit, panics of fn included, before the
	// connection goes back to the pool.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(hctx, handlerTx{tx}); err != nil {
		return &HandlerError{Err: err}
	}
	if conn.Conn().PgConn().TxStatus() == 'E' {
		return &HandlerError{Err: errSwallowed}
	}
	// What the handler set for the session (settings, its role) is reset
	// before the completion: the connection goes back to the pool as it came.
	b := &pgx.Batch{}
	for _, r := range s.statements.of(conn.Conn().PgConn()).resets {
		b.Queue(r)
	}
	var done int
	if len(cs) == 1 {
		b.Queue(succeedSQL, proc, cs[0].ID, cs[0].DispatchedAt)
	} else {
		// One completion for the batch: each claim that was taken back
		// meanwhile is left out of the count, and the batch rolls back.
		ids := make([]int64, len(cs))
		at := make([]time.Time, len(cs))
		evs := make([]string, len(cs))
		for i, c := range cs {
			ids[i], at[i], evs[i] = c.ID, c.DispatchedAt, kindText(events.Succeeded)
		}
		// _complete_outcomes, not the SQL function _complete, which the
		// server would parse and plan again at every call.
		b.Queue("SELECT done FROM pgrelay._complete_outcomes($1::pg_catalog.int8, $2::pg_catalog.int8[], $3::pg_catalog.timestamptz[], $4::pg_catalog.text[], $5::pg_catalog.text[])",
			proc, ids, at, evs, make([]*string, len(cs))).QueryRow(func(r pgx.Row) error { return r.Scan(&done) })
	}
	if err := tx.SendBatch(hctx, b).Close(); err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == prcodes.ClaimTakenBack {
			return ErrClaimLost
		}
		return fmt.Errorf("complete %s in its handler's transaction: %w", what, err)
	}
	if len(cs) > 1 && done != len(cs) {
		return ErrClaimLost
	}
	if err := tx.Commit(hctx); err != nil {
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) {
			// Refused at COMMIT (a deferred constraint of the handler's
			// writes): the handler's failure.
			return &HandlerError{Err: fmt.Errorf("commit: %w", err)}
		}
		return fmt.Errorf("commit the transaction of %s: %w", what, err)
	}
	return nil
}

// SetGoHandlers records the Go handler names of Processor proc
// (pgrelay._go_handlers_set), which pgrelay.unhandled_go_channels() reads.
func (s *Store) SetGoHandlers(ctx context.Context, proc int64, names []string) error {
	if names == nil {
		names = []string{}
	}
	if _, err := s.bg.Exec(ctx, "SELECT pgrelay._go_handlers_set($1::pg_catalog.int8, $2::pg_catalog.text[])",
		proc, names); err != nil {
		return fmt.Errorf("record the Go handlers of processor %d: %w", proc, err)
	}
	return nil
}

// UnhandledGo is a go channel whose handler no running Processor of the node
// has: its events wait.
type UnhandledGo struct {
	Channel string
	Handler string
	Pending int64
}

// UnhandledGoChannels returns pgrelay.unhandled_go_channels().
func UnhandledGoChannels(ctx context.Context, q Querier) ([]UnhandledGo, error) {
	rows, err := q.Query(ctx, "SELECT channel, handler, pending FROM pgrelay.unhandled_go_channels()")
	if err != nil {
		return nil, fmt.Errorf("unhandled_go_channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[UnhandledGo])
	if err != nil {
		return nil, fmt.Errorf("unhandled_go_channels: %w", err)
	}
	return out, nil
}

// errSwallowed is the failure of a handler that returned nil after a
// statement of its transaction failed.
var errSwallowed = errors.New("a statement of the handler failed, which aborts its transaction, yet it returned nil")

// errHandlerEndsTx is what a Go handler gets when it tries to end its
// transaction itself.
var errHandlerEndsTx = errors.New("the handler's transaction commits with its event's completion: " +
	"return nil to commit it, an error to roll it back")

// handlerTx is the transaction a Go handler gets: pgrelay's to end, since
// the event's completion commits in it. Savepoints (Begin) are the
// handler's own.
type handlerTx struct{ pgx.Tx }

// Commit refuses: the transaction commits when the handler returns nil.
func (handlerTx) Commit(context.Context) error { return errHandlerEndsTx }

// Rollback refuses: the transaction rolls back when the handler returns an
// error.
func (handlerTx) Rollback(context.Context) error { return errHandlerEndsTx }
