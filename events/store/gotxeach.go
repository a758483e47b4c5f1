package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/events"
)

// ErrBatchLate is a batch of Go handlers whose transaction the server
// refused after its handlers ran (a deferred constraint or a constraint
// trigger at COMMIT, the completion): which event's writes it refused is not
// known, so nothing of the batch is recorded and its events run again, each
// in a transaction of its own.
type ErrBatchLate struct{ Err error }

func (e *ErrBatchLate) Error() string {
	return "the batch's transaction failed after its handlers ran: " + e.Err.Error()
}
func (e *ErrBatchLate) Unwrap() error { return e.Err }

// ErrHandlerConnLost is a Go handler of a batch that lost the batch's
// connection (its deadline cut a statement, or the server ended the
// session), or left it unusable: the transaction is gone with the work of
// the events before it.
// Event K's outcome is Outcome (an attempt: its own failure); the batch's
// other events are still claimed, and run again.
type ErrHandlerConnLost struct {
	K       int
	Outcome Outcome
	Err     error
}

func (e *ErrHandlerConnLost) Error() string {
	return fmt.Sprintf("the handler of event %d lost the batch's connection: %s", e.Outcome.ID, e.Err)
}
func (e *ErrHandlerConnLost) Unwrap() error { return e.Err }

// RunGoTxEach runs the Go handlers of the claims cs (of one processor proc)
// in one transaction, one after the other, each under its own savepoint,
// and completes every claim in that transaction with one pgrelay._complete
// and one commit. run(ctx, tx, i) runs the handler of cs[i] under its
// channel's timeout, counted from when it starts, with a tx whose writes
// roll back to the event's savepoint when the handler fails (an error, a
// panic the caller turned into one, a timeout, a statement that failed even
// if the handler went on). outcome(i, err) is what to record for cs[i] given
// its handler's result (nil: succeeded; a *HandlerError otherwise).
//
// The savepoint is only taken when the handler first uses tx, so that
// handlers that do not write cost no round trip, and is sent with the
// handler's first Exec. When ctx is cancelled (a stop), the events not run
// yet are released and what ran is completed and committed all the same.
//
// It returns the outcomes recorded, in cs's order, once they committed. Its
// errors: ErrClaimLost (a claim was taken back meanwhile: nothing is
// recorded, every claim still held is still held), *ErrBatchLate,
// *ErrHandlerConnLost, or any other error, with nothing recorded.
func (s *Store) RunGoTxEach(ctx context.Context, proc int64, cs []Claimed,
	run func(ctx context.Context, tx pgx.Tx, i int) error,
	outcome func(i int, err error) Outcome) ([]Outcome, error) {
	what := fmt.Sprintf("a batch of %d events (%d, ...)", len(cs), cs[0].ID)
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return nil, fmt.Errorf("acquire a connection for %s: %w", what, err)
	}
	defer conn.Release()
	pc := conn.Conn().PgConn()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("begin the transaction of %s: %w", what, err)
	}
	// The completion and the commit run after a stop too: what ran is
	// recorded; a backstop bounds them.
	done, cancel := context.WithTimeout(context.WithoutCancel(ctx), directClaimTimeout)
	defer cancel()
	// Rolls back whatever did not commit before the connection goes back
	// to the pool (a no-op after the commit).
	defer func() { _ = tx.Rollback(done) }()
	resets := s.statements.of(pc).resets
	outs := make([]Outcome, len(cs))
	// held: the savepoint of the last handler that succeeded is not
	// released yet (the next savepoint releases it, in the same round trip).
	held := false
	for i, c := range cs {
		if ctx.Err() != nil {
			// Stopping: the events not started go back unrun.
			outs[i] = Outcome{ID: c.ID, ClaimedAt: c.DispatchedAt, Event: events.Release}
			continue
		}
		// A tx of its own per handler: one kept past its handler fails.
		ev := &eachTx{Tx: tx, resets: resets, held: held}
		herr := ev.run(ctx, c.Timeout, func(hctx context.Context) error { return run(hctx, ev, i) })
		if herr == nil && pc.IsClosed() {
			herr = errors.New("the handler's connection was lost")
		}
		if herr != nil {
			herr = &HandlerError{Err: herr}
		}
		if pc.IsClosed() {
			// The handler's statement lost the connection (its deadline
			// closes it): the transaction is gone.
			cancelOrphan(done, pc)
			return nil, &ErrHandlerConnLost{K: i, Outcome: outcome(i, herr), Err: herr}
		}
		if err := ev.end(done, herr != nil); err != nil {
			// The savepoint could not be rolled back (a handler that
			// panicked with rows open leaves the connection busy): the
			// transaction cannot go on, and the pool closes the connection.
			return nil, &ErrHandlerConnLost{K: i, Outcome: outcome(i, herr), Err: fmt.Errorf("%w; %w", herr, err)}
		}
		held = ev.held
		outs[i] = outcome(i, herr)
	}
	if held {
		// What the last handler set (settings, its role) is reset before
		// the completion: the connection goes back to the pool as it came.
		if _, err := tx.Exec(done, strings.Join(resets, "; ")); err != nil {
			return nil, fmt.Errorf("%s: reset the session: %w", what, err)
		}
	}
	n, err := complete(done, tx, &proc, outs)
	if err != nil {
		if late(pc, err) {
			return nil, &ErrBatchLate{Err: fmt.Errorf("recording the outcomes (pgrelay._complete): %w", err)}
		}
		return nil, fmt.Errorf("complete %s: %w", what, err)
	}
	if n != len(outs) {
		return nil, ErrClaimLost
	}
	if err := tx.Commit(done); err != nil {
		if late(pc, err) {
			return nil, &ErrBatchLate{Err: fmt.Errorf("commit: %w", err)}
		}
		return nil, fmt.Errorf("commit %s: %w", what, err)
	}
	return outs, nil
}

// late reports whether err, from a batch's completion or commit, is the
// server refusing the transaction for what it holds, not a lost connection.
func late(pc *pgconn.PgConn, err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && !sessionGone(pc, err)
}

// cancelOrphan asks the server to cancel whatever pc's session still runs:
// a handler's statement cut by its deadline closes the connection on this
// side only, and the server would run it to its end, holding the batch's
// locks meanwhile.
func cancelOrphan(ctx context.Context, pc *pgconn.PgConn) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_ = pc.CancelRequest(cctx)
}

// eachTx is the transaction the Go handler of one event of a batch gets:
// the batch's, under a savepoint of the event's own, taken when the handler
// first uses it. It cannot be committed or rolled back (the batch's
// completion commits it).
type eachTx struct {
	pgx.Tx
	resets []string
	// ctx is the handler's while it runs (nil before and after), for the
	// methods that take none.
	ctx context.Context
	// open: the handler's savepoint is taken; held: the savepoint of the
	// last handler that succeeded is not released yet (the handler's
	// savepoint releases it, in the same round trip; after the handler, its
	// own when it succeeded).
	open, held bool
	// err: taking the savepoint failed.
	err error
}

const (
	eachSavepointSQL = "SAVEPOINT pgrelay_event"
	eachReleaseSQL   = "RELEASE SAVEPOINT pgrelay_event"
	eachRollbackSQL  = "ROLLBACK TO SAVEPOINT pgrelay_event; RELEASE SAVEPOINT pgrelay_event"
)

// run runs one handler, fn, under timeout: a handler that returns nil once
// its context is done (past its timeout, or stopped) has not succeeded, as
// its completion would have failed in a transaction of its own.
func (t *eachTx) run(ctx context.Context, timeout time.Duration, fn func(ctx context.Context) error) error {
	hctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	t.ctx = hctx
	defer func() { t.ctx = nil }()
	err := fn(hctx)
	if err == nil {
		err = hctx.Err()
	}
	if err == nil && t.err != nil {
		err = t.err
	}
	if err == nil && t.open && t.Tx.Conn().PgConn().TxStatus() == 'E' {
		// A statement failed and the handler went on as if not.
		err = errSwallowed
	}
	return err
}

// end closes the handler's savepoint: rolled back when it failed, kept
// (released by the next one, or by the commit) when it succeeded.
func (t *eachTx) end(ctx context.Context, failed bool) error {
	if !t.open {
		return nil
	}
	t.open = false
	if !failed {
		t.held = true
		return nil
	}
	t.held = false
	if _, err := t.Tx.Exec(ctx, eachRollbackSQL); err != nil {
		return fmt.Errorf("roll back the failed handler's savepoint: %w", err)
	}
	return nil
}

// begin are the statements that take the running handler's savepoint: the
// last one's settings reset and its savepoint released first.
func (t *eachTx) begin() []string {
	if !t.held {
		return []string{eachSavepointSQL}
	}
	return append(append(make([]string, 0, len(t.resets)+2), t.resets...), eachReleaseSQL, eachSavepointSQL)
}

// savepoint takes the running handler's savepoint, once.
func (t *eachTx) savepoint(ctx context.Context) error {
	if t.open {
		return t.err
	}
	if t.ctx == nil {
		return errors.New("the handler's transaction is used after its handler returned")
	}
	t.open = true
	_, t.err = t.Tx.Exec(ctx, strings.Join(t.begin(), "; "))
	t.held = false
	if t.err != nil {
		t.err = fmt.Errorf("take the handler's savepoint: %w", t.err)
	}
	return t.err
}

// Exec sends the savepoint with the statement, in one round trip, the
// first time.
func (t *eachTx) Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error) {
	if t.open || t.ctx == nil || hasExecMode(args) {
		if err := t.savepoint(ctx); err != nil {
			return pgconn.CommandTag{}, err
		}
		return t.Tx.Exec(ctx, sql, args...)
	}
	b := &pgx.Batch{}
	for _, q := range t.begin() {
		b.Queue(q)
	}
	b.Queue(sql, args...)
	t.open, t.held = true, false
	br := t.Tx.SendBatch(ctx, b)
	for range len(b.QueuedQueries) - 1 {
		if _, err := br.Exec(); err != nil {
			t.err = fmt.Errorf("take the handler's savepoint: %w", err)
			_ = br.Close()
			return pgconn.CommandTag{}, t.err
		}
	}
	tag, err := br.Exec()
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	return tag, err
}

// hasExecMode reports whether args begin with options of how the statement
// is sent, which a batch does not take.
func hasExecMode(args []any) bool {
	if len(args) == 0 {
		return false
	}
	switch args[0].(type) {
	case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
		return true
	}
	return false
}

func (t *eachTx) Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error) {
	if err := t.savepoint(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Query(ctx, sql, args...)
}

func (t *eachTx) QueryRow(ctx context.Context, sql string, args ...any) pgx.Row {
	if err := t.savepoint(ctx); err != nil {
		return errRow{err}
	}
	return t.Tx.QueryRow(ctx, sql, args...)
}

func (t *eachTx) SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults {
	if err := t.savepoint(ctx); err != nil {
		return errBatch{err}
	}
	return t.Tx.SendBatch(ctx, b)
}

func (t *eachTx) CopyFrom(ctx context.Context, table pgx.Identifier, columns []string, src pgx.CopyFromSource) (int64, error) {
	if err := t.savepoint(ctx); err != nil {
		return 0, err
	}
	return t.Tx.CopyFrom(ctx, table, columns, src)
}

func (t *eachTx) Prepare(ctx context.Context, name, sql string) (*pgconn.StatementDescription, error) {
	if err := t.savepoint(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Prepare(ctx, name, sql)
}

// Begin starts a savepoint of the handler's own inside its event's.
func (t *eachTx) Begin(ctx context.Context) (pgx.Tx, error) {
	if err := t.savepoint(ctx); err != nil {
		return nil, err
	}
	return t.Tx.Begin(ctx)
}

// LargeObjects and Conn give access past the wrapper: the savepoint is
// taken first (with the handler's context; its error then fails the
// handler).
func (t *eachTx) LargeObjects() pgx.LargeObjects {
	if t.ctx != nil {
		_ = t.savepoint(t.ctx)
	}
	return t.Tx.LargeObjects()
}

func (t *eachTx) Conn() *pgx.Conn {
	if t.ctx != nil {
		_ = t.savepoint(t.ctx)
	}
	return t.Tx.Conn()
}

// Commit refuses: the batch's transaction commits with its completion.
func (*eachTx) Commit(context.Context) error { return errHandlerEndsTx }

// Rollback refuses: the event's savepoint rolls back when its handler
// returns an error.
func (*eachTx) Rollback(context.Context) error { return errHandlerEndsTx }

// errRow is a pgx.Row that fails with err.
type errRow struct{ err error }

func (r errRow) Scan(...any) error { return r.err }

// errBatch is a pgx.BatchResults that fails with err.
type errBatch struct{ err error }

func (b errBatch) Exec() (pgconn.CommandTag, error) { return pgconn.CommandTag{}, b.err }
func (b errBatch) Query() (pgx.Rows, error)         { return nil, b.err }
func (b errBatch) QueryRow() pgx.Row                { return errRow(b) }
func (b errBatch) Close() error                     { return b.err }
func (errBatch) Tx() pgx.Tx                         { return nil }
