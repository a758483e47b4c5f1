package cli_test

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// appSetup creates the handlers the subprocess tests register. Each records
// the payload in app.ran in the handler's transaction, so app.ran holds a row
// for every committed success and nothing else.
const appSetup = `
CREATE SCHEMA app;
CREATE TABLE app.ran (payload text NOT NULL, at timestamptz NOT NULL DEFAULT clock_timestamp());
-- The crash test holds advisory lock 1 exclusively to stop work's handlers
-- at a moment of its choosing.
CREATE FUNCTION app.work(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_advisory_xact_lock_shared(1);
  PERFORM pg_sleep(0.002);
  INSERT INTO app.ran(payload) VALUES (p);
END $$;
CREATE FUNCTION app.slow(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(1);
  INSERT INTO app.ran(payload) VALUES (p);
END $$;
CREATE FUNCTION app.stuck(p text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_sleep(30);
  INSERT INTO app.ran(payload) VALUES (p);
END $$;
`

// enqueue registers channel with handler and notifies n events (payloads
// "p1".."pn"); returns their ids.
func (d *db) enqueue(channel, handler string, n int) []int64 {
	d.T.Helper()
	d.Exec(`SELECT pgrelay.register($1, $2)`, channel, handler)
	ids := d.IDs(`SELECT pgrelay.notify_many($1, ARRAY(SELECT 'p' || g FROM generate_series(1, $2::int) g))`,
		channel, n)
	require.Len(d.T, ids, n)
	return ids
}

// handlersRunning counts the backends currently running fn's handler.
func (d *db) handlersRunning(fn string) int {
	d.T.Helper()
	return d.Count(`SELECT count(*) FROM pg_stat_activity
	                 WHERE datname = current_database() AND pid <> pg_backend_pid()
	                   AND state = 'active' AND query LIKE $1`, "SELECT app."+fn+"(%")
}

// assertClean checks what every stopped Processor must leave: no claim held,
// no instance registered.
func (d *db) assertClean() {
	d.T.Helper()
	assert.Zero(d.T, d.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NOT NULL OR dispatched_by IS NOT NULL`),
		"no event is left in flight")
	assert.Zero(d.T, d.Count(`SELECT count(*) FROM pgrelay.processors`), "no processor is left registered")
}

// succeeded counts the succeeded log rows.
func (d *db) succeeded() int {
	d.T.Helper()
	return d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`)
}

// shutGate holds advisory lock 1, at which app.work's handlers wait, until
// open is called.
func (d *db) shutGate() (open func()) {
	d.T.Helper()
	gate, err := pgx.Connect(context.Background(), d.URL)
	require.NoError(d.T, err)
	d.T.Cleanup(func() { _ = gate.Close(context.Background()) })
	_, err = gate.Exec(context.Background(), "SELECT pg_advisory_lock(1)")
	require.NoError(d.T, err)
	return func() {
		_, err := gate.Exec(context.Background(), "SELECT pg_advisory_unlock(1)")
		require.NoError(d.T, err)
	}
}

// finishWork lets p drain all n events of the crash tests, stops it, and
// checks that every event succeeded and every payload ran exactly once
// (the handler's effects commit with its completion); events other than
// 'succeeded' and those in also must not occur.
func (d *db) finishWork(p *proc, ids []int64, n int, also ...string) {
	d.T.Helper()
	testenv.Eventually(d.T, 90*time.Second, "every event to succeed", func() bool {
		return d.succeeded() >= n || p.exited()
	})
	require.False(d.T, p.exited(), "the second processor exited on its own")
	p.signal(syscall.SIGTERM)
	require.Equal(d.T, 0, p.wait(60*time.Second), "graceful stop exits 0")

	allowed := append([]string{"succeeded"}, also...)
	assert.Equal(d.T, n, d.succeeded())
	assert.Equal(d.T, n, d.Count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
	                               WHERE event = 'succeeded' AND origin_id = ANY($1)`, ids))
	assert.Zero(d.T, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> ALL($1)`, allowed),
		"no failures, give-ups or other events: %s", d.Text(`SELECT string_agg(event || ': ' || coalesce(error, ''), '; ')
		                                                      FROM pgrelay.log WHERE event <> ALL($1)`, allowed))
	assert.Equal(d.T, n, d.Count(`SELECT count(*) FROM app.ran`))
	assert.Equal(d.T, n, d.Count(`SELECT count(DISTINCT payload) FROM app.ran`))
	assert.Zero(d.T, d.Count(`SELECT count(*) FROM pgrelay.queue`), "the queue is empty")
	d.assertClean()
}

// TestRunKillAndRestart is the end-to-end crash test: a Processor killed
// with SIGKILL in the middle of a backlog loses nothing and runs nothing
// twice; a second Processor rescues its claims and finishes the work.
func TestRunKillAndRestart(t *testing.T) {
	t.Parallel()
	const n = 2000
	d := newDB(t)
	d.Exec(appSetup)
	ids := d.enqueue("work", "SELECT app.work($1)", n)

	// One transaction per event (--sql-batch 1): the gate below counts one
	// running handler per claim.
	args := []string{"run", "--database-url", d.URL, "--heartbeat-interval", "200ms", "--dead-after", "1s",
		"--concurrency", "16", "--shutdown-timeout", "10s", "--sql-batch", "1"}

	first := startCLI(t, nil, args...)
	testenv.Eventually(t, 60*time.Second, "300 events to succeed under the first processor", func() bool {
		return d.succeeded() >= 300 || first.exited()
	})
	require.False(t, first.exited(), "the first processor exited on its own")

	// Hold the handlers at their start (they wait for the shared lock) until
	// the processor has claimed all it can, then kill it: it dies holding 16
	// claims whose handlers are running. Their transactions were sent in one
	// pipeline, BEGIN to COMMIT, so they live on in the server after the kill.
	// The gate stays shut until the second processor has rescued the claims:
	// the dead processor's transactions then find their claims taken back and
	// must roll back, while the second processor runs the same events again.
	openGate := d.shutGate()
	testenv.Eventually(t, 60*time.Second, "16 claims held by the first processor", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NOT NULL`) == 16 &&
			d.handlersRunning("work") == 16
	})
	first.signal(syscall.SIGKILL)
	assert.Equal(t, -1, first.wait(10*time.Second), "killed by the signal")
	doneBefore := d.succeeded()
	require.Less(t, doneBefore, n, "the backlog outlasted the first processor")
	held := d.IDs(`SELECT origin_id FROM pgrelay.queue WHERE dispatched_at IS NOT NULL ORDER BY 1`)
	require.Len(t, held, 16, "the killed processor's claims")
	require.Equal(t, 1, d.Count(`SELECT count(*) FROM pgrelay.processors`))
	t.Logf("killed after %d of %d events, holding %d claims", doneBefore, n, len(held))

	second := startCLI(t, nil, args...)
	testenv.Eventually(t, 60*time.Second, "the second processor to rescue the dead one's claims", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'rescued'`) >= len(held) || second.exited()
	})
	require.False(t, second.exited(), "the second processor exited on its own")
	assert.Equal(t, doneBefore, d.succeeded(), "nothing completed while the gate was shut")
	openGate()

	// Every event succeeded exactly once, and nothing but the rescues
	// happened to any; every payload ran exactly once (the dead processor's
	// transactions, which found their claims taken back, left nothing).
	d.finishWork(second, ids, n, "rescued")
	// The claims the dead processor held were rescued, each once.
	assert.Equal(t, held, d.IDs(`SELECT origin_id FROM pgrelay.log WHERE event = 'rescued' ORDER BY 1`))
}

// TestRunSIGTERMFinishesRunningHandlers: on SIGTERM, handlers already running
// finish (within --shutdown-timeout), the rest is released, and the process
// exits 0.
func TestRunSIGTERMFinishesRunningHandlers(t *testing.T) {
	t.Parallel()
	const n = 12
	d := newDB(t)
	d.Exec(appSetup)
	ids := d.enqueue("slow", "SELECT app.slow($1)", n)

	// One transaction per event (--sql-batch 1), so the claims are visible.
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--concurrency", "4",
		"--shutdown-timeout", "10s", "--heartbeat-interval", "200ms", "--sql-batch", "1")
	testenv.Eventually(t, 60*time.Second, "4 handlers to run", func() bool {
		return d.handlersRunning("slow") >= 4 || p.exited()
	})
	require.False(t, p.exited())
	running := d.IDs(`SELECT origin_id FROM pgrelay.queue WHERE dispatched_at IS NOT NULL`)
	require.NotEmpty(t, running)
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second), "graceful stop exits 0")

	assert.Empty(t, d.IDs(`SELECT r FROM unnest($1::bigint[]) r
	                        WHERE NOT EXISTS (SELECT FROM pgrelay.log l WHERE l.origin_id = r AND l.event = 'succeeded')`,
		running), "the events running at SIGTERM finished and succeeded")
	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`),
		"nothing failed, was rescued or otherwise cut short")
	ok := d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`)
	left := d.Count(`SELECT count(*) FROM pgrelay.queue`)
	assert.Equal(t, n, ok+left, "every event either succeeded or is still queued")
	assert.Less(t, ok, n, "SIGTERM stopped claiming: some events are left")
	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.queue WHERE attempt <> 1 OR NOT (origin_id = ANY($1))`, ids))
	assert.Equal(t, ok, d.Count(`SELECT count(*) FROM app.ran`))
	d.assertClean()
	assert.Contains(t, p.stderr.String(), "stopping: finishing in-flight events")
}

// TestRunSIGTERMCancelsAtShutdownTimeout: handlers still running at the
// shutdown timeout are cancelled and their events go back to pending; they
// are not counted as failed attempts. While it waits, run says for what.
func TestRunSIGTERMCancelsAtShutdownTimeout(t *testing.T) {
	t.Parallel()
	const n = 5
	d := newDB(t)
	d.Exec(appSetup)
	ids := d.enqueue("stuck", "SELECT app.stuck($1)", n)

	p := startCLI(t, nil, "run", "--database-url", d.URL, "--concurrency", "2",
		"--shutdown-timeout", "6s", "--heartbeat-interval", "200ms", "--sql-batch", "1")
	testenv.Eventually(t, 60*time.Second, "2 handlers to run", func() bool {
		return d.handlersRunning("stuck") >= 2 || p.exited()
	})
	require.False(t, p.exited())
	require.Equal(t, 2, d.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NOT NULL`))
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second), "graceful stop exits 0")

	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.log`), "no failed (or any other) outcome was logged")
	assert.Equal(t, n, d.Count(`SELECT count(*) FROM pgrelay.queue
	                             WHERE attempt = 1 AND dispatched_at IS NULL AND origin_id = ANY($1)`, ids),
		"every event is pending again, on its first attempt")
	assert.Zero(t, d.Count(`SELECT count(*) FROM app.ran`))
	d.assertClean()
	// The handlers were cancelled in the server, not just abandoned.
	testenv.Eventually(t, 15*time.Second, "the cancelled handlers' statements to end", func() bool {
		return d.handlersRunning("stuck") == 0
	})
	assert.Contains(t, p.stderr.String(), "cancelling them")
	assert.Regexp(t, `stopping: waiting for in-flight events and outcomes to be written \(5s, 2 slots in use; Ctrl-C again to exit now\)`, p.stderr.String())
}

// TestRunKillDirectBatches is the crash test for direct batches (the default
// for 'none' sql channels): their rows are locked, never marked claimed, so a
// Processor killed with SIGKILL leaves nothing to rescue. Its batches either
// commit whole in the server or roll back; either way every event runs
// exactly once.
func TestRunKillDirectBatches(t *testing.T) {
	t.Parallel()
	const n = 2000
	d := newDB(t)
	d.Exec(appSetup)
	ids := d.enqueue("work", "SELECT app.work($1)", n)
	args := []string{"run", "--database-url", d.URL, "--heartbeat-interval", "200ms", "--dead-after", "1s",
		"--sql-batch-concurrency", "16", "--shutdown-timeout", "10s"}

	first := startCLI(t, nil, args...)
	testenv.Eventually(t, 60*time.Second, "300 events to succeed under the first processor", func() bool {
		return d.succeeded() >= 300 || first.exited()
	})
	require.False(t, first.exited(), "the first processor exited on its own")
	openGate := d.shutGate()
	testenv.Eventually(t, 60*time.Second, "the first processor's batches to wait at the gate", func() bool {
		return d.handlersRunning("work") >= 1
	})
	first.signal(syscall.SIGKILL)
	assert.Equal(t, -1, first.wait(10*time.Second), "killed by the signal")
	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NOT NULL`),
		"direct batches mark no claims")
	doneBefore := d.succeeded()
	require.Less(t, doneBefore, n, "the backlog outlasted the first processor")

	// The second processor skips the rows the dead one's batches still hold
	// locked and starts on others, which wait at the gate too.
	second := startCLI(t, nil, args...)
	before := d.handlersRunning("work")
	testenv.Eventually(t, 60*time.Second, "the second processor's batches to wait at the gate", func() bool {
		return d.handlersRunning("work") > before || second.exited()
	})
	require.False(t, second.exited(), "the second processor exited on its own")
	assert.Equal(t, doneBefore, d.succeeded(), "nothing completed while the gate was shut")
	openGate()

	// Nothing failed or was rescued; every payload ran exactly once.
	d.finishWork(second, ids, n)
}

// TestRunSIGTERMFinishesDirectBatches: on SIGTERM a direct batch already
// running finishes and commits; no new batch starts.
func TestRunSIGTERMFinishesDirectBatches(t *testing.T) {
	t.Parallel()
	const n = 12
	d := newDB(t)
	d.Exec(appSetup)
	d.enqueue("slow", "SELECT app.slow($1)", n)

	p := startCLI(t, nil, "run", "--database-url", d.URL, "--sql-batch-concurrency", "4",
		"--shutdown-timeout", "20s", "--heartbeat-interval", "200ms")
	testenv.Eventually(t, 60*time.Second, "a handler to run", func() bool {
		return d.handlersRunning("slow") >= 1 || p.exited()
	})
	require.False(t, p.exited())
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second), "graceful stop exits 0")

	ok := d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`)
	assert.Positive(t, ok, "the batch running at SIGTERM finished")
	assert.Less(t, ok, n, "SIGTERM stopped starting batches: some events are left")
	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
	assert.Equal(t, n, ok+d.Count(`SELECT count(*) FROM pgrelay.queue WHERE attempt = 1`))
	assert.Equal(t, ok, d.Count(`SELECT count(*) FROM app.ran`))
	d.assertClean()
}

// TestRunSIGTERMCancelsDirectBatches: a direct batch still running at the
// shutdown timeout is cancelled and rolls back whole: its events are pending
// again on their first attempt, nothing is logged.
func TestRunSIGTERMCancelsDirectBatches(t *testing.T) {
	t.Parallel()
	const n = 5
	d := newDB(t)
	d.Exec(appSetup)
	ids := d.enqueue("stuck", "SELECT app.stuck($1)", n)

	p := startCLI(t, nil, "run", "--database-url", d.URL, "--sql-batch-concurrency", "2",
		"--shutdown-timeout", "1s", "--heartbeat-interval", "200ms")
	testenv.Eventually(t, 60*time.Second, "a handler to run", func() bool {
		return d.handlersRunning("stuck") >= 1 || p.exited()
	})
	require.False(t, p.exited())
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second), "graceful stop exits 0")

	assert.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.log`), "no outcome was logged")
	assert.Equal(t, n, d.Count(`SELECT count(*) FROM pgrelay.queue
	                             WHERE attempt = 1 AND dispatched_at IS NULL AND origin_id = ANY($1)`, ids))
	assert.Zero(t, d.Count(`SELECT count(*) FROM app.ran`))
	d.assertClean()
	testenv.Eventually(t, 15*time.Second, "the cancelled handlers' statements to end", func() bool {
		return d.handlersRunning("stuck") == 0
	})
}

// TestRunMetricsAddrInvalid: a --metrics-addr that cannot be listened on
// fails run with exit 1 and leaves nothing behind.
func TestRunMetricsAddrInvalid(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	code, _, errOut := runCLI(t, nil, "run", "--database-url", d.URL, "--metrics-addr", "256.0.0.1:1")
	assert.Equal(t, 1, code, errOut)
	ls := lines(errOut)
	assert.True(t, strings.HasPrefix(ls[len(ls)-1], "pgrelay run: --metrics-addr 256.0.0.1:1: "), errOut)
	d.assertClean()
}
