package migrations

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// DefaultProcessorDeadAfter is how long a Processor may go without a
// heartbeat before UpWith counts it as stopped, when Options give none: the
// Processors' default --dead-after (actors.Defaults, which this package
// cannot import: actors imports it). TestMigrateDeadAfterIsTheProcessors
// (internal/cli) fails when the two differ.
const DefaultProcessorDeadAfter = 10 * time.Second

// DefaultLockWait bounds how long migrate waits for pgrelay's tables.
const DefaultLockWait = time.Minute

// DefaultLockReport is how often migrate reports that it still waits for a
// table (Options.Waiting).
const DefaultLockReport = 5 * time.Second

// Options tune UpWith; the zero value is Up's.
type Options struct {
	// ProcessorDeadAfter: a Processor whose last heartbeat is older counts
	// as stopped (default DefaultProcessorDeadAfter). Give the --dead-after
	// the Processors run with.
	ProcessorDeadAfter time.Duration
	// LockWait bounds the wait for pgrelay's tables, held by transactions
	// of producers, consoles or Processors, before any migration is applied
	// (default DefaultLockWait). Past it Up fails with a LockTimeoutError
	// and changes nothing.
	LockWait time.Duration
	// LockReport is how long one wait for a table lasts before Waiting is
	// told and the wait starts over (default DefaultLockReport).
	LockReport time.Duration
	// Waiting, when set, is told each time a wait for a table timed out and
	// Up tries again.
	Waiting func(LockWait)
	// Files, when set, holds the migration files to apply instead of this
	// pgrelay's own: an older release's (tests that build a database at its
	// schema, then upgrade it).
	Files fs.FS
	// AllowReplication upgrades a Spock node whose subscriptions are
	// enabled or that a peer streams from, which Up refuses otherwise
	// (ReplicatingError).
	AllowReplication bool
}

func (o Options) withDefaults() Options {
	if o.ProcessorDeadAfter <= 0 {
		o.ProcessorDeadAfter = DefaultProcessorDeadAfter
	}
	if o.LockWait <= 0 {
		o.LockWait = DefaultLockWait
	}
	if o.LockReport <= 0 {
		o.LockReport = DefaultLockReport
	}
	return o
}

// RunningProcessor is a Processor instance registered in pgrelay.processors
// whose heartbeat is recent.
type RunningProcessor struct {
	ID       int64
	Node     int
	Hostname string
	PID      int
	// Version is the release the Processor reported (pgrelay version).
	Version string
	// Silent is how long ago its last heartbeat was.
	Silent time.Duration
}

// ProcessorsRunningError is Up's refusal to migrate while Processors run:
// they run on the schema they started with, and a migration changes it
// under them (functions they call are replaced or gone). Nothing was
// changed. Stop them, migrate, and start the new release's.
type ProcessorsRunningError struct {
	Processors []RunningProcessor
	DeadAfter  time.Duration
}

func (e *ProcessorsRunningError) Error() string {
	var b strings.Builder
	if len(e.Processors) == 1 {
		b.WriteString("migrate: a Processor is running on this database: ")
	} else {
		fmt.Fprintf(&b, "migrate: %d Processors are running on this database: ", len(e.Processors))
	}
	for i, p := range e.Processors {
		if i > 0 {
			b.WriteString("; ")
		}
		fmt.Fprintf(&b, "processor %d (node %d, host %s, pid %d, pgrelay %s, last heartbeat %s ago)",
			p.ID, p.Node, orDash(p.Hostname), p.PID, orDash(p.Version), p.Silent.Round(time.Millisecond))
	}
	fmt.Fprintf(&b, "; a Processor runs on the schema it started with: stop every Processor, migrate, then start this release's "+
		"(docs/upgrading.md); one killed without stopping counts as stopped once its last heartbeat is %s old (--dead-after): "+
		"nothing was changed", e.DeadAfter)
	return b.String()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// refuseRunningProcessors returns a ProcessorsRunningError when a Processor
// of any node heartbeat within opts.ProcessorDeadAfter, by the database's
// clock at the time of the check. pgrelay.processors is as old as the
// schema of release 0.1.0.
func refuseRunningProcessors(ctx context.Context, tx pgx.Tx, opts Options) error {
	var exists bool
	if err := tx.QueryRow(ctx, "SELECT pg_catalog.to_regclass('pgrelay.processors'::pg_catalog.text) IS NOT NULL").Scan(&exists); err != nil {
		return fmt.Errorf("migrate: look for pgrelay.processors: %w", err)
	}
	if !exists {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT p.processor_id, p.node_id, COALESCE(p.hostname, ''), COALESCE(p.pid, 0), COALESCE(p.version, ''),
		  GREATEST(EXTRACT(epoch FROM pg_catalog.clock_timestamp() - p.last_seen)::pg_catalog.float8, 0::pg_catalog.float8)
		  FROM pgrelay.processors p
		 WHERE p.last_seen > pg_catalog.clock_timestamp() - $1::pg_catalog.float8 * '1 second'::pg_catalog.interval
		 ORDER BY p.processor_id`, opts.ProcessorDeadAfter.Seconds())
	if err != nil {
		return fmt.Errorf("migrate: read the running Processors: %w", err)
	}
	running, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (RunningProcessor, error) {
		var p RunningProcessor
		var node, pid int32
		var silent float64
		err := r.Scan(&p.ID, &node, &p.Hostname, &pid, &p.Version, &silent)
		p.Node, p.PID, p.Silent = int(node), int(pid), time.Duration(silent*float64(time.Second))
		return p, err
	})
	if err != nil {
		return fmt.Errorf("migrate: read the running Processors: %w", err)
	}
	if len(running) > 0 {
		return &ProcessorsRunningError{Processors: running, DeadAfter: opts.ProcessorDeadAfter}
	}
	return nil
}
