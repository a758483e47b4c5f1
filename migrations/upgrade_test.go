package migrations_test

// Upgrading a database of release 0.1.0. The release has no tag: it is the
// commit that wrote the changelog's [0.1.0] section (8f952b6), and
// testdata/v0.1.0 holds its migration files as they were there (git show
// 8f952b6:migrations/0001_pgrelay.up.sql, ...), so a test can build a
// database exactly at that schema and upgrade it. Its Processor cannot be
// built here; the tests send the statements it sent, as its store wrote them.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// v010 is a database at the schema of release 0.1.0, with one channel of
// each concurrency mode and events queued on them.
func v010(t *testing.T) (url string, c *pgx.Conn) {
	t.Helper()
	url = pg.EmptyDB(t)
	c = testenv.ConnectAs(t, url, "", -1)
	res, err := migrations.UpFS(bg, c, os.DirFS("testdata/v0.1.0"))
	require.NoError(t, err)
	require.Equal(t, 2, res.Version)
	for _, sql := range []string{
		"SELECT pgrelay.register('bulk', 'SELECT length($1)')",
		"SELECT pgrelay.register('ordered', 'SELECT length($1)', p_concurrency_mode := 'channel')",
		"SELECT pgrelay.register('keyed', 'SELECT length($1)', p_concurrency_mode := 'payload')",
		"SELECT pgrelay.notify_many('bulk', ARRAY(SELECT 'b' || i FROM generate_series(1, 20) i))",
		"SELECT pgrelay.notify_many('ordered', ARRAY(SELECT 'o' || i FROM generate_series(1, 20) i))",
		"SELECT pgrelay.notify_many('keyed', ARRAY(SELECT 'k' || (i % 4) FROM generate_series(1, 20) i))",
	} {
		_, err := c.Exec(bg, sql)
		require.NoError(t, err, sql)
	}
	return url, c
}

// A Processor of 0.1.0 registered and heartbeating: migrate refuses, plainly
// and changing nothing, until it stops; one whose heartbeat is older than
// the dead-after counts as stopped. Then the upgrade keeps every event.
func TestUpgradeFromV010RefusesWhileAProcessorRuns(t *testing.T) {
	t.Parallel()
	url, c := v010(t)
	// As 0.1.0's Processor registers (store.StartProcessor at 8f952b6).
	old := testenv.One[int64](t, c, "SELECT pgrelay._processor_start($1::pg_catalog.text, $2::pg_catalog.text, $3::pg_catalog.int4, $4::pg_catalog.text)",
		"single", "relay-1", int32(4242), "0.1.0")
	gone := testenv.One[int64](t, c, "SELECT pgrelay._processor_start('single', 'relay-2', 77, '0.1.0')")
	_, err := c.Exec(bg, "UPDATE pgrelay.processors SET last_seen = now() - interval '1 minute' WHERE processor_id = $1", gone)
	require.NoError(t, err)

	m := testenv.ConnectAs(t, url, "", -1)
	_, err = migrations.Up(bg, m)
	var running *migrations.ProcessorsRunningError
	require.ErrorAs(t, err, &running)
	require.Len(t, running.Processors, 1, "the one silent for a minute counts as stopped")
	require.Equal(t, old, running.Processors[0].ID)
	require.Equal(t, "0.1.0", running.Processors[0].Version)
	require.ErrorContains(t, err, "a Processor is running on this database: processor")
	require.ErrorContains(t, err, "host relay-1, pid 4242, pgrelay 0.1.0")
	require.ErrorContains(t, err, "stop every Processor, migrate, then start this release's")
	require.ErrorContains(t, err, "nothing was changed")
	v, err := migrations.Current(bg, m)
	require.NoError(t, err)
	require.Equal(t, 2, v, "nothing applied")

	// A heartbeat counts from the database's clock at the check, whatever
	// the dead-after: with one of a minute and a half the second is live too.
	_, err = migrations.UpWith(bg, m, migrations.Options{ProcessorDeadAfter: 90 * time.Second})
	require.ErrorAs(t, err, &running)
	require.Len(t, running.Processors, 2)

	// It stops as 0.1.0's Processor stops.
	_, err = c.Exec(bg, "SELECT pgrelay._processor_stop($1)", old)
	require.NoError(t, err)
	res, err := migrations.Up(bg, m)
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), res.Version)
	require.Len(t, res.Applied, migrations.Latest()-2)
	require.Equal(t, 60, testenv.One[int](t, c, "SELECT count(*) FROM pgrelay.queue"))
	require.Equal(t, 60, testenv.One[int](t, c,
		"SELECT count(*) FROM pgrelay.queue q WHERE pgrelay.status(q.origin_id) = 'pending'"))

	// Nothing to apply: migrate runs whatever runs.
	_, err = c.Exec(bg, "SELECT pgrelay._processor_start('single', 'relay-3', 78, 'new')")
	require.NoError(t, err)
	res, err = migrations.Up(bg, m)
	require.NoError(t, err)
	require.Empty(t, res.Applied)
}

// The lock order of 0.1.0's lane batch (store.ClaimLanesDirect, then
// _complete, at 8f952b6): its claim holds the queue and the channels, its
// completion then writes the log. The migrations from 0.1.0 change the log,
// then the channels, then the queue: run one after the other, the batch
// waits for the migration that waits for the batch, and PostgreSQL ends one
// of the two with a deadlock (40P01). migrate takes every pgrelay table
// before it changes any, and waits for a table only while holding none of
// the others: neither sees a deadlock, and the batch completes first.
func TestUpgradeFromV010NeverDeadlocksAProcessor(t *testing.T) {
	t.Parallel()
	url, _ := v010(t)
	w := testenv.ConnectAs(t, url, "", -1)
	tx, err := w.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	rows, err := tx.Query(bg, "SELECT id, origin_id, channel, lane, payload, attempt, enqueued_at, expired, handler, timeout_ms, max_attempts"+
		" FROM pgrelay._claim_lanes_direct($1::pg_catalog.text, $2::pg_catalog.bool, $3::pg_catalog.int8, $4::pg_catalog.int4, $5::pg_catalog.text, $6::pg_catalog.int8)",
		"single", false, nil, int32(10), "", int64(-1))
	require.NoError(t, err)
	ids, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (int64, error) {
		vals, err := r.Values()
		if err != nil {
			return 0, err
		}
		return vals[0].(int64), nil
	})
	require.NoError(t, err)
	require.NotEmpty(t, ids)

	m := testenv.ConnectAs(t, url, "", -1)
	migrated := make(chan error, 1)
	go func() {
		_, err := migrations.Up(context.Background(), m)
		migrated <- err
	}()
	obs := testenv.ConnectAs(t, url, "", -1)
	testenv.Eventually(t, 30*time.Second, "migrate waiting for a lock the lane batch holds", func() bool {
		return testenv.One[bool](t, obs, "SELECT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1 AND wait_event_type = 'Lock')",
			int32(m.PgConn().PID()))
	})

	events := make([]string, len(ids))
	errs := make([]*string, len(ids))
	for i := range ids {
		events[i] = "succeeded"
	}
	_, err = tx.Exec(bg, "SELECT pgrelay._complete(NULL, $1, NULL, $2, $3)", ids, events, errs)
	requireNoDeadlock(t, err, "the lane batch's completion")
	requireNoDeadlock(t, tx.Commit(bg), "the lane batch's commit")

	requireNoDeadlock(t, <-migrated, "migrate")
	v, err := migrations.Current(bg, obs)
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), v)
	require.Equal(t, len(ids), testenv.One[int](t, obs, "SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'"))
}

// A table held past the lock wait: migrate gives up, names the table and
// who holds it, and changes nothing; it succeeds once the holder is done.
// A producer's transaction still open after its notify() holds the
// channel's lock row (pgrelay.channel_locks, the first table in migrate's
// order) and the queue.
func TestUpgradeLockWaitEnds(t *testing.T) {
	t.Parallel()
	url, _ := v010(t)
	w := testenv.ConnectAs(t, url, "", -1)
	_, err := w.Exec(bg, "SET application_name = 'long-writer'")
	require.NoError(t, err)
	tx, err := w.Begin(bg)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(bg) }()
	_, err = tx.Exec(bg, "SELECT pgrelay.notify('bulk', 'late')")
	require.NoError(t, err)

	m := testenv.ConnectAs(t, url, "", -1)
	var waits []migrations.LockWait
	_, err = migrations.UpWith(bg, m, migrations.Options{LockWait: 600 * time.Millisecond,
		LockReport: 200 * time.Millisecond, Waiting: func(lw migrations.LockWait) { waits = append(waits, lw) }})
	var lt *migrations.LockTimeoutError
	require.ErrorAs(t, err, &lt)
	require.Equal(t, "pgrelay.channel_locks", lt.Table)
	require.ErrorContains(t, err, "migrate: could not lock pgrelay.channel_locks within 600ms")
	require.ErrorContains(t, err, "application long-writer")
	require.ErrorContains(t, err, "nothing was changed")
	require.NotEmpty(t, waits, "each lock timeout is reported before migrate tries again")
	require.Equal(t, "pgrelay.channel_locks", waits[0].Table)
	var holders []int32
	for _, h := range waits[0].Holders {
		holders = append(holders, h.PID)
	}
	require.Contains(t, holders, int32(w.PgConn().PID()))
	v, err := migrations.Current(bg, m)
	require.NoError(t, err)
	require.Equal(t, 2, v)

	require.NoError(t, tx.Commit(bg))
	res, err := migrations.Up(bg, m)
	require.NoError(t, err)
	require.Equal(t, migrations.Latest(), res.Version)
}

// A Processor refuses a schema newer than its own, as an older one; the
// commands that only read accept a newer one.
func TestRequireLatestRefusesANewerSchema(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	c := d.Conn(-1)
	require.NoError(t, migrations.RequireLatest(bg, c))
	d.Exec("INSERT INTO pgrelay.schema_migrations (version, name) VALUES ($1, 'from_a_newer_release')", migrations.Latest()+1)
	err := migrations.RequireLatest(bg, c)
	require.ErrorContains(t, err, "newer than this pgrelay's")
	require.ErrorContains(t, err, "docs/upgrading.md")
	require.NoError(t, migrations.RequireMigrated(bg, c))
}

func requireNoDeadlock(t *testing.T, err error, what string) {
	t.Helper()
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == "40P01" {
		t.Fatalf("%s met a deadlock: %v", what, err)
	}
	require.NoError(t, err, what)
}

// The baseline is the releases: 0001 and 0002 are exactly the files of
// v0.1.0 kept in testdata, and 0003 that of v0.2.0, so a database installed
// by a release and one installed today start from the same statements. A
// change to a released file is a change to a released schema, which only a
// new migration may make.
func TestBaselineIsTheRelease(t *testing.T) {
	all, err := migrations.All()
	require.NoError(t, err)
	released := 0
	for _, m := range all {
		release := "v0.1.0"
		switch {
		case m.Version == 3:
			release = "v0.2.0"
		case m.Version > 3:
			continue
		}
		released++
		want, err := os.ReadFile(fmt.Sprintf("testdata/%s/%04d_%s.up.sql", release, m.Version, m.Name))
		require.NoError(t, err)
		require.Equal(t, string(want), m.SQL, "migration %04d_%s differs from release %s", m.Version, m.Name, release)
	}
	require.Equal(t, 3, released)
}

// v020 is release 0.2.0's migrations and function files: testdata/v0.2.0
// holds what the release added to v0.1.0's (git archive v0.2.0 migrations).
func v020(t *testing.T) fstest.MapFS {
	t.Helper()
	fsys := fstest.MapFS{}
	for _, dir := range []string{"testdata/v0.1.0", "testdata/v0.2.0"} {
		require.NoError(t, fs.WalkDir(os.DirFS(dir), ".", func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() {
				return err
			}
			data, err := os.ReadFile(path.Join(dir, p))
			fsys[p] = &fstest.MapFile{Data: data}
			return err
		}))
	}
	return fsys
}

// v020DB is a database installed by release 0.2.0: its migrations and its
// function files.
func v020DB(t *testing.T) (url string, c *pgx.Conn) {
	t.Helper()
	url = pg.EmptyDB(t)
	c = testenv.ConnectAs(t, url, "", -1)
	res, err := migrations.UpFSFunctions(bg, c, v020(t))
	require.NoError(t, err)
	require.Equal(t, 3, res.Version)
	require.True(t, res.Functions)
	return url, c
}

// A database of release 0.2.0, with a traced event queued, upgrades to the
// schema a fresh install has; the trace stays, and a traced enqueue stores
// its trace as before.
func TestUpgradeFromV020GivesTheSnapshot(t *testing.T) {
	t.Parallel()
	url, c := v020DB(t)
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	traced := func() int64 {
		tx, err := c.Begin(bg)
		require.NoError(t, err)
		_, err = tx.Exec(bg, "SET LOCAL pgrelay.traceparent = '"+tp+"'")
		require.NoError(t, err)
		id := testenv.One[int64](t, tx, "SELECT pgrelay.notify('c', 'x')")
		require.NoError(t, tx.Commit(bg))
		return id
	}
	_, err := c.Exec(bg, "SELECT pgrelay.register('c', 'SELECT length($1)')")
	require.NoError(t, err)
	before := traced()

	res, err := migrations.Up(bg, c)
	require.NoError(t, err)
	var later []int
	for v := 4; v <= migrations.Latest(); v++ {
		later = append(later, v)
	}
	require.Equal(t, later, versionsOf(res.Applied))
	require.True(t, res.Functions)
	requireSnapshot(t, dumpSchema(t, url), "upgraded from v0.2.0")
	after := traced()
	require.Equal(t, []string{tp, tp}, testenv.Column[string](t, c,
		"SELECT traceparent FROM pgrelay.event_traces WHERE origin_id IN ($1, $2)", before, after))
}
