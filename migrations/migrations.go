// Package migrations holds pgrelay's SQL schema as numbered files and the runner
// that applies them. The CLI (`pgrelay migrate`), the tests and `pgrelay dev`
// all use this runner.
//
// Each file is named NNNN_name.up.sql. 0001_pgrelay and 0002_notifier are the
// baseline of release v0.1.0, one file per schema; from v0.1.0 on, a change
// to the schema comes only as a new file appended after the last one, and a
// released file is never edited (docs/upgrading.md). Up applies every file whose version is
// not yet recorded in pgrelay.schema_migrations, in version order, in one
// transaction that first locks pgrelay.schema_migrations: several processes
// may migrate one database at once, the others wait and then find nothing
// left to do. Only the migrating roles can take that lock (no advisory lock
// that any login could hold). With something to apply, it refuses while a
// Processor runs (processors.go) and takes every pgrelay table before it
// changes any, waiting only while it holds none (locks.go), so no other
// transaction deadlocks with it. On a Spock node the migration stays on that
// node and pgrelay's tables join replication, and an upgrade is refused
// while the node replicates with its peers (spock.go).
package migrations

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"sort"
	"strconv"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

//go:embed *.up.sql
var files embed.FS

// Migration is one numbered SQL file.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

var fileName = regexp.MustCompile(`^(\d{4})_([a-z0-9_]+)\.up\.sql$`)

// All returns the embedded migrations in version order.
func All() ([]Migration, error) { return all(files) }

// all returns the migrations of fsys in version order.
func all(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read embedded migrations: %w", err)
	}
	var out []Migration
	for _, e := range entries {
		if e.IsDir() {
			continue // functions/ (functions.go)
		}
		m := fileName.FindStringSubmatch(e.Name())
		if m == nil {
			return nil, fmt.Errorf("migration file %q is not named NNNN_name.up.sql", e.Name())
		}
		v, _ := strconv.Atoi(m[1])
		body, err := fs.ReadFile(fsys, e.Name())
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", e.Name(), err)
		}
		out = append(out, Migration{Version: v, Name: m[2], SQL: string(body)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	for i := 1; i < len(out); i++ {
		if out[i].Version == out[i-1].Version {
			return nil, fmt.Errorf("two migrations have version %d", out[i].Version)
		}
	}
	return out, nil
}

// NodeLocalTables names the tables of schema pgrelay that each node of a
// multi-master cluster keeps for itself and that must not be replicated:
// its record of applied migrations, the lock rows its producers take, its
// node id and wake-up key, its publisher's lease, its wake-up slots
// (unlogged: no replication could carry them), and the Go handler names of
// its Processors, and the claim's count of its rate-limited channels'
// starts with the lock that orders their claims (flow_starts, flow_locks).
// Every other table of schemas pgrelay and pgrelay_notifier is replicated
// (docs/multi-master.md).
func NodeLocalTables() []string {
	return []string{"schema_migrations", "schema_functions", "channel_locks", "this_node", "dedup_locks", "publish_leases",
		"wake_slots", "go_handlers", "flow_locks", "flow_starts"}
}

// Latest is the highest embedded migration version.
func Latest() int {
	all, err := All()
	if err != nil || len(all) == 0 {
		return 0
	}
	return all[len(all)-1].Version
}

// Beginner is what Up needs: *pgx.Conn and *pgxpool.Pool both satisfy it.
type Beginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// Result tells what Up did.
type Result struct {
	// Applied lists the migrations this call applied, in order.
	Applied []Migration
	// Version is the schema version after the call.
	Version int
	// Replication lists what the call changed in Spock's replication sets
	// (spock.go), one line each.
	Replication []string
	// Functions tells that the call applied the function files
	// (functions.go): they differed from the database's.
	Functions bool
}

// Up applies every pending migration in one transaction, with the default
// Options.
func Up(ctx context.Context, db Beginner) (Result, error) { return UpWith(ctx, db, Options{}) }

// UpWith is Up with opts.
func UpWith(ctx context.Context, db Beginner, opts Options) (Result, error) {
	fsys := fs.FS(files)
	fset, err := readFunctions(functionFiles)
	if err != nil {
		return Result{}, err
	}
	if opts.Files != nil {
		// Another set of files (a test's, a release's): its function files
		// if it has any.
		fsys, fset = opts.Files, nil
		if _, err := fs.Stat(fsys, "functions"); err == nil {
			if fset, err = readFunctions(fsys); err != nil {
				return Result{}, err
			}
		}
	}
	return up(ctx, db, fsys, fset, opts, true)
}

// up applies every pending migration of fsys in one transaction: a migration
// that fails rolls back every one applied with it, and their records.
//
// With something to apply it first refuses while a Processor runs
// (processors.go), then takes every pgrelay table (locks.go), and checks
// the Processors again: a Processor that registers meanwhile waits for the
// migration's commit.
//
// fset, when not nil, is the function files to apply after the migrations
// (functions.go): whenever they differ from the database's.
func up(ctx context.Context, db Beginner, fsys fs.FS, fset *functionSet, opts Options, firstTry bool) (Result, error) {
	opts = opts.withDefaults()
	migs, err := all(fsys)
	if err != nil {
		return Result{}, err
	}
	tx, err := db.Begin(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("migrate: begin: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()

	// The migrations run under pgrelay's own search_path (as its sessions
	// do, see store.SearchPath): what they name unqualified, and the
	// defaults and checks they create, resolve in pg_catalog only, never to
	// a look-alike in a schema of the migrating login's search_path.
	if _, err := tx.Exec(ctx, "SELECT pg_catalog.set_config('search_path', 'pg_catalog, pg_temp', true)"); err != nil {
		return Result{}, fmt.Errorf("migrate: set the search_path: %w", err)
	}
	// Before any DDL, the schema's creation included: on Spock it must stay on this
	// node (spock.go).
	spock, err := spockPrepare(ctx, tx)
	if err != nil {
		return Result{}, err
	}
	// The first migration of a database creates the schema: two migrating
	// at once then collide on the schema's name (the second's CREATE waits
	// for the first to commit and fails). The second starts over once and
	// finds the table there, locked by nobody or by a migration it waits for.
	if err := createVersionTable(ctx, tx); err != nil {
		if !isDuplicateObject(err) || !firstTry {
			return Result{}, err
		}
		_ = tx.Rollback(context.WithoutCancel(ctx))
		return up(ctx, db, fsys, fset, opts, false)
	}
	if _, err := tx.Exec(ctx, "LOCK TABLE pgrelay.schema_migrations IN SHARE ROW EXCLUSIVE MODE"); err != nil {
		return Result{}, fmt.Errorf("migrate: lock pgrelay.schema_migrations: %w", err)
	}
	rows, err := tx.Query(ctx, "SELECT version, name FROM pgrelay.schema_migrations ORDER BY version")
	if err != nil {
		return Result{}, fmt.Errorf("migrate: read applied versions: %w", err)
	}
	records, err := pgx.CollectRows(rows, pgx.RowToStructByPos[record])
	if err != nil {
		return Result{}, fmt.Errorf("migrate: read applied versions: %w", err)
	}
	known := map[int]string{}
	for _, m := range migs {
		known[m.Version] = m.Name
	}
	if records, err = mapDevelopmentRecords(ctx, tx, records, known); err != nil {
		return Result{}, err
	}
	records, lacking, err := foldLater(ctx, tx, records)
	if err != nil {
		return Result{}, err
	}
	applied := map[int]bool{}
	current := 0
	for _, r := range records {
		// A record this pgrelay cannot place: the database was migrated by
		// the pre-release files the baseline replaced, or by a newer
		// pgrelay. Applying by number there would skip or repeat work.
		if name, ok := known[int(r.Version)]; !ok || name != r.Name {
			return Result{}, fmt.Errorf("migrate: the database records migration %04d_%s, which this pgrelay does not have "+
				"(migrated by a pre-release or a newer pgrelay): nothing was changed; see docs/upgrading.md", r.Version, r.Name)
		}
		applied[int(r.Version)] = true
		current = max(current, int(r.Version))
	}
	var pending []Migration
	for _, m := range migs {
		if !applied[m.Version] {
			pending = append(pending, m)
		}
	}
	functionsDiffer := false
	if fset != nil {
		a, err := readAppliedFunctions(ctx, tx)
		if err != nil {
			return Result{}, err
		}
		if a.checksum != fset.checksum {
			if newerRelease(a.release) {
				return Result{}, fmt.Errorf("migrate: %w: nothing was changed", errNewerFunctions(a))
			}
			functionsDiffer = true
		}
	}
	if len(pending) > 0 || functionsDiffer || len(lacking) > 0 {
		// Refused before any wait for a lock, and again once every table
		// is held.
		if err := refuseRunningProcessors(ctx, tx, opts); err != nil {
			return Result{}, err
		}
		if err := spockRefuseReplicating(ctx, tx, spock, current, opts); err != nil {
			return Result{}, err
		}
		if err := lockTables(ctx, tx, opts); err != nil {
			return Result{}, err
		}
		if err := refuseRunningProcessors(ctx, tx, opts); err != nil {
			return Result{}, err
		}
		if err := spockRefuseReplicating(ctx, tx, spock, current, opts); err != nil {
			return Result{}, err
		}
	}
	var res Result
	for _, change := range lacking {
		if _, err := tx.Exec(ctx, change); err != nil {
			return Result{}, fmt.Errorf("migrate: apply what %04d_%s gained after it first landed: %w", folded.Version, folded.Name, err)
		}
	}
	for _, m := range pending {
		if _, err := tx.Exec(ctx, m.SQL); err != nil {
			return Result{}, fmt.Errorf("migrate: apply %04d_%s: %w", m.Version, m.Name, err)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO pgrelay.schema_migrations (version, name) VALUES ($1::pg_catalog.int4, $2::pg_catalog.text)",
			m.Version, m.Name); err != nil {
			return Result{}, fmt.Errorf("migrate: record %04d_%s: %w", m.Version, m.Name, err)
		}
		res.Applied = append(res.Applied, m)
		current = max(current, m.Version)
	}
	if functionsDiffer {
		if err := applyFunctions(ctx, tx, fset); err != nil {
			return Result{}, err
		}
		res.Functions = true
	}
	if res.Replication, err = spockReplicationSets(ctx, tx, spock); err != nil {
		return Result{}, err
	}
	if err := tx.Commit(ctx); err != nil {
		return Result{}, fmt.Errorf("migrate: commit: %w", err)
	}
	res.Version = current
	return res, nil
}

// record is a row of pgrelay.schema_migrations.
type record struct {
	Version int32
	Name    string
}

// createVersionTable creates schema pgrelay and its version tables (the
// migrations and the function files applied) when missing.
func createVersionTable(ctx context.Context, tx pgx.Tx) error {
	if _, err := tx.Exec(ctx, `
		CREATE SCHEMA IF NOT EXISTS pgrelay;
		CREATE TABLE IF NOT EXISTS pgrelay.schema_migrations (
		  version    pg_catalog.int4 PRIMARY KEY,
		  name       pg_catalog.text NOT NULL,
		  applied_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
		);
		CREATE TABLE IF NOT EXISTS pgrelay.schema_functions (
		  checksum   pg_catalog.text NOT NULL,
		  release    pg_catalog.text NOT NULL,
		  applied_at pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
		);`); err != nil {
		return fmt.Errorf("migrate: create the version table: %w", err)
	}
	return nil
}

// isDuplicateObject: err is a unique violation on a catalog (a concurrent
// CREATE ... IF NOT EXISTS committed first) or a duplicate schema or table.
func isDuplicateObject(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "23505" || pe.Code == "42P06" || pe.Code == "42P07")
}

// RequireLatest returns an error unless the database's schema is at Latest:
// what `pgrelay run` and an embedded Processor check at start. An older
// schema needs `pgrelay migrate`; a newer one was migrated by a newer
// pgrelay, whose Processors run on it (docs/upgrading.md).
func RequireLatest(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) error {
	v, err := requireMigrated(ctx, q)
	if err != nil {
		return err
	}
	if want := Latest(); v > want {
		return fmt.Errorf("the database's pgrelay schema is at version %d, newer than this pgrelay's %d: "+
			"it was migrated by a newer pgrelay; run that release's Processors (docs/upgrading.md)", v, want)
	}
	return requireFunctions(ctx, q)
}

// RequireMigrated returns an error when the database's schema is older than
// Latest: what the commands that only read check (stats, nodes).
func RequireMigrated(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) error {
	_, err := requireMigrated(ctx, q)
	return err
}

func requireMigrated(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (int, error) {
	v, err := Current(ctx, q)
	if err != nil {
		return 0, err
	}
	if want := Latest(); v < want {
		return v, fmt.Errorf("the database's pgrelay schema is at version %d, this pgrelay needs %d: run 'pgrelay migrate' first", v, want)
	}
	return v, nil
}

// Current returns the database's schema version: 0 when pgrelay was never
// migrated there.
func Current(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, "SELECT pg_catalog.to_regclass('pgrelay.schema_migrations'::pg_catalog.text) IS NOT NULL").Scan(&exists); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var v *int32
	if err := q.QueryRow(ctx, "SELECT pg_catalog.max(version) FROM pgrelay.schema_migrations").Scan(&v); err != nil {
		return 0, fmt.Errorf("read the schema version: %w", err)
	}
	if v == nil {
		return 0, nil
	}
	return int(*v), nil
}
