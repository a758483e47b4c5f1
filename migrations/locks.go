package migrations

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Before it applies anything, a migration takes every table of schemas
// pgrelay and pgrelay_notifier in ACCESS EXCLUSIVE mode, in one fixed
// order, and it waits for a table only while holding none of the others:
// each is tried without waiting (NOWAIT); when one is busy, the migration
// lets go of all it took (a savepoint) and waits for that one alone, then
// tries them all again. So no transaction can hold one table that the
// migration waits for while it waits for another that the migration holds:
// a Processor, a producer or a console never meets a deadlock (40P01) from
// a migration. Once it holds them all, its DDL waits for no one there.
//
// Each wait lasts at most Options.LockReport (lock_timeout), is reported
// with who holds the table (Options.Waiting), and starts over; past
// Options.LockWait the migration gives up, changing nothing.

// LockWait is a report of a wait for a table that timed out: migrate tries
// again (Options.Waiting).
type LockWait struct {
	// Table is the table waited for, schema-qualified.
	Table string
	// Waited is how long migrate has waited for the tables so far.
	Waited time.Duration
	// Holders are the sessions that held a lock on Table.
	Holders []LockHolder
}

// LockHolder is a session that holds a lock on a table migrate waits for.
type LockHolder struct {
	PID         int32
	Application string
	User        string
	// State is pg_stat_activity's (active, idle in transaction, ...); empty
	// when the migrating login may not see other logins' sessions.
	State string
	// InTransaction is how long its transaction has been open (0 when not
	// visible).
	InTransaction time.Duration
}

func (h LockHolder) String() string {
	s := fmt.Sprintf("pid %d (application %s, user %s", h.PID, orDash(h.Application), orDash(h.User))
	if h.State != "" {
		s += ", " + h.State
	}
	if h.InTransaction > 0 {
		s += fmt.Sprintf(", transaction open for %s", h.InTransaction.Round(time.Millisecond))
	}
	return s + ")"
}

// LockTimeoutError is Up's failure to take pgrelay's tables within
// Options.LockWait. Nothing was changed.
type LockTimeoutError struct {
	Table   string
	Waited  time.Duration
	Holders []LockHolder
}

func (e *LockTimeoutError) Error() string {
	held := "sessions that have ended since"
	if len(e.Holders) > 0 {
		parts := make([]string, len(e.Holders))
		for i, h := range e.Holders {
			parts[i] = h.String()
		}
		held = strings.Join(parts, ", ")
	}
	return fmt.Sprintf("migrate: could not lock %s within %s: held by %s; migrate waits for a table only while "+
		"holding no other, so that no transaction deadlocks with it, and gives up after --lock-wait: "+
		"nothing was changed; migrate again when those transactions are done (docs/upgrading.md)", e.Table, e.Waited, held)
}

const lockSavepoint = "pgrelay_migrate_locks"

// lockTables takes every table of pgrelay's schemas as described above.
func lockTables(ctx context.Context, tx pgx.Tx, opts Options) error {
	rows, err := tx.Query(ctx, `SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
		  FROM pg_catalog.pg_class c
		  JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		 WHERE n.nspname IN ('pgrelay'::pg_catalog.name, 'pgrelay_notifier'::pg_catalog.name)
		   AND c.relkind IN ('r'::pg_catalog.char, 'p'::pg_catalog.char)
		   AND NOT (n.nspname = 'pgrelay'::pg_catalog.name AND c.relname = 'schema_migrations'::pg_catalog.name)
		 ORDER BY n.nspname, c.relname`)
	if err != nil {
		return fmt.Errorf("migrate: list pgrelay's tables: %w", err)
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("migrate: list pgrelay's tables: %w", err)
	}
	if len(tables) == 0 {
		return nil
	}
	var timeout string
	if err := tx.QueryRow(ctx, "SELECT pg_catalog.current_setting('lock_timeout')").Scan(&timeout); err != nil {
		return fmt.Errorf("migrate: read lock_timeout: %w", err)
	}
	if _, err := tx.Exec(ctx, "SAVEPOINT "+lockSavepoint); err != nil {
		return fmt.Errorf("migrate: savepoint: %w", err)
	}
	start := time.Now()
	for {
		busy := ""
		for _, t := range tables {
			_, err := tx.Exec(ctx, "LOCK TABLE "+t+" IN ACCESS EXCLUSIVE MODE NOWAIT")
			if isLockNotAvailable(err) {
				busy = t
				break
			}
			if err != nil {
				return fmt.Errorf("migrate: lock %s: %w", t, err)
			}
		}
		if busy == "" {
			if _, err := tx.Exec(ctx, "RELEASE SAVEPOINT "+lockSavepoint); err != nil {
				return fmt.Errorf("migrate: release savepoint: %w", err)
			}
			return nil
		}
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+lockSavepoint); err != nil {
			return fmt.Errorf("migrate: let go of pgrelay's tables: %w", err)
		}
		if err := waitForTable(ctx, tx, busy, timeout, start, opts); err != nil {
			return err
		}
	}
}

// waitForTable takes table, and holds it, having let go of every other:
// in steps of opts.LockReport, each reported, until opts.LockWait has
// passed since start. Then it sets lock_timeout back to timeout.
func waitForTable(ctx context.Context, tx pgx.Tx, table, timeout string, start time.Time, opts Options) error {
	for {
		left := opts.LockWait - time.Since(start)
		if left <= 0 {
			holders, err := lockHolders(ctx, tx, table)
			if err != nil {
				return err
			}
			return &LockTimeoutError{Table: table, Waited: opts.LockWait, Holders: holders}
		}
		step := max(min(left, opts.LockReport), time.Millisecond)
		if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('lock_timeout', $1::pg_catalog.text, true)",
			fmt.Sprintf("%dms", step.Milliseconds())); err != nil {
			return fmt.Errorf("migrate: set lock_timeout: %w", err)
		}
		_, err := tx.Exec(ctx, "LOCK TABLE "+table+" IN ACCESS EXCLUSIVE MODE")
		if err == nil {
			if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('lock_timeout', $1::pg_catalog.text, true)", timeout); err != nil {
				return fmt.Errorf("migrate: set lock_timeout back: %w", err)
			}
			return nil
		}
		if !isLockNotAvailable(err) {
			return fmt.Errorf("migrate: lock %s: %w", table, err)
		}
		// The failed statement aborted the savepoint's work, lock_timeout
		// included.
		if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT "+lockSavepoint); err != nil {
			return fmt.Errorf("migrate: let go of pgrelay's tables: %w", err)
		}
		if opts.Waiting != nil && time.Since(start) < opts.LockWait {
			holders, err := lockHolders(ctx, tx, table)
			if err != nil {
				return err
			}
			opts.Waiting(LockWait{Table: table, Waited: time.Since(start), Holders: holders})
		}
	}
}

// lockHolders lists the other sessions holding a lock on table.
func lockHolders(ctx context.Context, tx pgx.Tx, table string) ([]LockHolder, error) {
	rows, err := tx.Query(ctx, `SELECT DISTINCT COALESCE(l.pid, 0), COALESCE(a.application_name, ''), COALESCE(a.usename::pg_catalog.text, ''),
		  COALESCE(a.state, ''),
		  COALESCE(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - a.xact_start)::pg_catalog.float8, 0::pg_catalog.float8)
		  FROM pg_catalog.pg_locks l
		  LEFT JOIN pg_catalog.pg_stat_activity a ON a.pid = l.pid
		 WHERE l.locktype = 'relation' AND l.granted
		   AND l.database = (SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database())
		   AND l.relation = $1::pg_catalog.text::pg_catalog.regclass
		   AND l.pid <> pg_catalog.pg_backend_pid()
		 ORDER BY 1`, table)
	if err != nil {
		return nil, fmt.Errorf("migrate: read who holds %s: %w", table, err)
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (LockHolder, error) {
		var h LockHolder
		var open float64
		err := r.Scan(&h.PID, &h.Application, &h.User, &h.State, &open)
		h.InTransaction = time.Duration(open * float64(time.Second))
		return h, err
	})
}

// isLockNotAvailable: a NOWAIT lock held by another session, or a
// lock_timeout.
func isLockNotAvailable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03"
}
