package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

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
// last one's released first. What the handlers of a batch set reaches the
// next handler of the batch, of the same channel; the batch's completion
// resets the session (completeGo).
func (t *eachTx) begin() []string {
	if !t.held {
		return []string{eachSavepointSQL}
	}
	return []string{eachReleaseSQL, eachSavepointSQL}
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
