package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Statements remembers which statements each hot connection has prepared. A
// batch's handlers and its own statements run as prepared statements, parsed
// and planned once per connection rather than once per event: on a no-op
// handler, parsing and planning cost the server more than running it.
type Statements struct {
	mu    sync.Mutex
	conns map[*pgconn.PgConn]*connStatements
	// limit is maxPrepared unless a test sets it.
	limit int
}

// connStatements are one connection's prepared statements by key. Only the
// goroutine holding the connection uses them.
type connStatements struct {
	// names are the prepared statements by key, with their parameters and
	// result columns: a batch binds and executes them without asking the
	// server to describe each one again.
	names map[statementKey]*pgconn.StatementDescription
	stale []string // forgotten, still allocated
	next  int
	// resets are the statements that reset the session after a handler:
	// superuserResets when the connection logged in as a superuser.
	resets []string
	// pipeline is the slice of the connection's last batch pipeline's
	// statements, emptied, for its next.
	pipeline []statement
}

// statementKey is a statement's text and parameter types; comparable, so a
// lookup allocates nothing.
type statementKey struct {
	sql  string
	oids [maxParams]uint32
	n    int
}

// maxParams is the most parameters a statement may have to be prepared (the
// batches' statements have up to three; a handler one).
const maxParams = 4

func keyOf(sql string, oids []uint32) (statementKey, bool) {
	k := statementKey{sql: sql, n: len(oids)}
	if len(oids) > maxParams {
		return k, false
	}
	copy(k.oids[:], oids)
	return k, true
}

// maxPrepared bounds a connection's prepared statements: past it the
// connection deallocates them all and starts again (handlers change rarely;
// the bound only keeps a long-running Processor whose handlers keep changing
// from growing without end).
const maxPrepared = 256

// pruneAt is how many connections the cache holds before it forgets those
// that closed.
const pruneAt = 256

func (p *Statements) of(pc *pgconn.PgConn) *connStatements {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.conns == nil {
		p.conns = map[*pgconn.PgConn]*connStatements{}
	}
	cs, ok := p.conns[pc]
	if !ok {
		if len(p.conns) >= pruneAt {
			for c := range p.conns {
				if c.IsClosed() {
					delete(p.conns, c)
				}
			}
		}
		cs = &connStatements{names: map[statementKey]*pgconn.StatementDescription{}, resets: sessionResets}
		// Read before any handler ran on the connection (the server
		// reports the setting whenever it changes).
		if pc.ParameterStatus("is_superuser") == "on" {
			cs.resets = superuserResets
		}
		p.conns[pc] = cs
	}
	return cs
}

// batch builds the pipeline of stmts on pc, each as a prepared statement
// (prepared on first use), or unprepared when the server would not prepare
// it.
func (p *Statements) batch(ctx context.Context, pc *pgconn.PgConn, stmts []statement) (*pgconn.Batch, error) {
	cs := p.of(pc)
	pb := &pgconn.Batch{}
	for _, st := range stmts {
		sd, ok, err := cs.name(ctx, pc, p.limit, st.sql, st.oids, st.timeoutMS)
		if err != nil {
			return nil, err
		}
		if ok {
			pb.ExecStatement(sd, st.args, nil, nil)
		} else {
			pb.ExecParams(st.sql, st.args, st.oids, nil, nil)
		}
	}
	return pb, nil
}

// beginBatch is batch for a pipeline that opens its own transaction:
// stmts[0] is BEGIN. When a statement is not prepared on pc yet, BEGIN runs
// first on its own (a statement is prepared inside a transaction, under a
// savepoint) and the pipeline holds stmts[off:], off being 1; else it holds
// them all.
func (p *Statements) beginBatch(ctx context.Context, pc *pgconn.PgConn, stmts []statement) (pb *pgconn.Batch, off int, err error) {
	cs := p.of(pc)
	for _, st := range stmts {
		key, fits := keyOf(st.sql, st.oids)
		if _, ok := cs.names[key]; ok || !fits {
			continue // prepared, or never (it runs unprepared)
		}
		if err := execSimple(ctx, pc, stmts[0].sql); err != nil {
			return nil, 0, fmt.Errorf("begin: %w", err)
		}
		// BEGIN itself, for the next pipeline.
		if _, _, err := cs.name(ctx, pc, p.limit, stmts[0].sql, stmts[0].oids, 0); err != nil {
			return nil, 0, err
		}
		off = 1
		break
	}
	pb, err = p.batch(ctx, pc, stmts[off:])
	return pb, off, err
}

// name returns the statement under which sql (with parameters of types
// oids) is prepared on pc, preparing it first if needed. pc is inside the batch's
// transaction, which a failed Parse would abort, so a first preparation runs
// under a savepoint, and under timeoutMS as statement_timeout when it is
// positive (parsing waits for the locks on the tables a statement names). ok
// is false when the server refused to prepare the statement (a handler that
// no longer parses): the caller runs it unprepared, where it fails as that
// event's own error. err is any other failure.
// limit bounds the connection's statements (maxPrepared when 0).
func (cs *connStatements) name(ctx context.Context, pc *pgconn.PgConn, limit int, sql string, oids []uint32,
	timeoutMS int64) (sd *pgconn.StatementDescription, ok bool, err error) {
	key, fits := keyOf(sql, oids)
	if !fits {
		return nil, false, nil
	}
	if sd, found := cs.names[key]; found {
		return sd, true, nil
	}
	// RELEASE keeps a SET LOCAL made under the savepoint; the pipeline sets
	// the timeout it needs before its first statement that needs one.
	begin := "SAVEPOINT pgrelay_prepare"
	if timeoutMS > 0 {
		begin += "; SET LOCAL statement_timeout = " + strconv.FormatInt(timeoutMS, 10)
	}
	if err := execSimple(ctx, pc, begin); err != nil {
		return nil, false, fmt.Errorf("prepare a statement: %w", err)
	}
	if limit <= 0 {
		limit = maxPrepared
	}
	if len(cs.names)+len(cs.stale) >= limit {
		for _, sd := range cs.names {
			cs.stale = append(cs.stale, sd.Name)
		}
		for _, n := range cs.stale {
			if err := pc.Deallocate(ctx, n); err != nil {
				return nil, false, fmt.Errorf("deallocate prepared statement %s: %w", n, err)
			}
		}
		clear(cs.names)
		cs.stale = cs.stale[:0]
	}
	cs.next++
	n := "pgrelay_batch_" + strconv.Itoa(cs.next)
	sd, perr := pc.Prepare(ctx, n, sql, oids)
	var pgErr *pgconn.PgError
	if perr != nil && !errors.As(perr, &pgErr) {
		return nil, false, fmt.Errorf("prepare a statement: %w", perr)
	}
	if perr != nil {
		err = execSimple(ctx, pc, "ROLLBACK TO SAVEPOINT pgrelay_prepare")
	}
	if err == nil {
		err = execSimple(ctx, pc, "RELEASE SAVEPOINT pgrelay_prepare; SET LOCAL statement_timeout = 0")
	}
	if err != nil {
		return nil, false, fmt.Errorf("prepare a statement: %w", err)
	}
	if perr != nil {
		return nil, false, nil
	}
	cs.names[key] = sd
	return sd, true, nil
}

// forget drops sql's statement from pc's cache, so that the next use
// prepares it again (after the server said its cached plan no longer fits).
// The stale statement stays allocated until the connection's statements
// reach maxPrepared and are deallocated together.
func (p *Statements) forget(pc *pgconn.PgConn, sql string, oids []uint32) {
	cs := p.of(pc)
	key, _ := keyOf(sql, oids)
	if sd, ok := cs.names[key]; ok {
		cs.stale = append(cs.stale, sd.Name)
		delete(cs.names, key)
	}
}

// Warm readies a new hot connection for batches (a pgxpool AfterConnect
// hook): it prepares the batches' own statements, outside any transaction,
// and runs the prepared completion on nothing, so that the backend has loaded
// the catalogs, compiled the functions and planned the completion before its
// first batch, which would otherwise take several milliseconds longer than
// the next. A schema that is not there yet (the Processor's start reports
// that itself) leaves the statements to be prepared on first use; any other
// error fails the connection.
func (p *Statements) Warm(ctx context.Context, c *pgx.Conn) error {
	pc := c.PgConn()
	cs := p.of(pc)
	for _, st := range batchStatements {
		key, _ := keyOf(st.sql, st.oids)
		if _, ok := cs.names[key]; ok {
			continue
		}
		cs.next++
		n := "pgrelay_batch_" + strconv.Itoa(cs.next)
		sd, err := pc.Prepare(ctx, n, st.sql, st.oids)
		if err != nil {
			return unlessNoSchema(fmt.Errorf("warm a connection: prepare %q: %w", st.sql, err))
		}
		cs.names[key] = sd
	}
	key, _ := keyOf(completeSQL, completeOIDs)
	_, err := pc.ExecPrepared(ctx, cs.names[key].Name, [][]byte{[]byte("{}"), []byte("{}"), []byte("{}")}, nil, nil).Close()
	if err != nil {
		return fmt.Errorf("warm a connection: complete nothing: %w", err)
	}
	return nil
}

// unlessNoSchema is err, or nil when err is the server not knowing pgrelay's
// schema, tables or functions (not migrated yet).
func unlessNoSchema(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "3F000" || pgErr.Code == "42P01" || pgErr.Code == "42883") {
		return nil
	}
	return err
}

func execSimple(ctx context.Context, pc *pgconn.PgConn, sql string) error {
	_, err := pc.Exec(ctx, sql).ReadAll()
	return err
}
