package actors_test

import (
	"bytes"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// The janitor deletes log rows past the retention and keeps the rest.
func TestActorJanitorTrimsLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, at)
	        SELECT pgrelay._id_floor(now() - interval '10 days') + n, n, n, 'old', 1, 'succeeded', now() - interval '10 days'
	          FROM generate_series(1, 12000) n`)
	e.Exec(`INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event)
	        SELECT n, n, 'new', 1, 'succeeded' FROM generate_series(1, 10) n`)
	e.startProcessor(func(c *actors.Config) { c.LogRetention = 7 * 24 * time.Hour })
	testenv.Eventually(e.T, 30*time.Second, "old log rows to be trimmed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'old'`) == 0
	})
	require.Equal(t, 10, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'new'`))
}

// The janitor deletes the dead letters that ended before DeadLetterRetention
// and keeps the rest.
func TestActorJanitorTrimsDeadLetters(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, outcome, ended_at, node)
	        SELECT n, n, 'c', 'p', 1, 'gave_up', now() - CASE WHEN n <= 7000 THEN interval '15 days' ELSE interval '13 days' END, 0
	          FROM generate_series(1, 7010) n`)
	e.startProcessor(func(c *actors.Config) { c.DeadLetterRetention = 14 * 24 * time.Hour })
	testenv.Eventually(e.T, 30*time.Second, "old dead letters to be trimmed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.dead_letters WHERE id <= 7000`) == 0
	})
	require.Equal(t, 10, e.Count(`SELECT count(*) FROM pgrelay.dead_letters`))
}

// The Processor's metrics count what happened.
func TestActorMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('m', 'SELECT $1')`)
	e.Exec(`SELECT pgrelay.register('bad', 'SELECT 1/0 WHERE $1 IS NOT NULL', p_max_attempts := 2,
	  p_retry_delay := '10 milliseconds')`)
	reg := prometheus.NewRegistry()
	p := e.startProcessor(func(c *actors.Config) { c.Registerer = reg })
	e.Exec(`SELECT pgrelay.notify_many('m', ARRAY['1', '2', '3'])`)
	e.Exec(`SELECT pgrelay.notify('bad', 'x')`)
	testenv.Eventually(e.T, 10*time.Second, "5 outcomes", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 5
	})
	m := p.Metrics()
	// The counters move just after the outcome commits.
	testenv.Eventually(e.T, 10*time.Second, "the counters", func() bool {
		return testutil.ToFloat64(m.Succeeded.WithLabelValues("m")) == 3 &&
			testutil.ToFloat64(m.GaveUp.WithLabelValues("bad")) == 1 && testutil.ToFloat64(m.InFlight) == 0 &&
			testutil.ToFloat64(m.Failed.WithLabelValues("bad")) == 1
	})
	require.Equal(t, 3.0, testutil.ToFloat64(m.Succeeded.WithLabelValues("m")))
	require.Equal(t, 3.0, testutil.ToFloat64(m.Claimed.WithLabelValues("m")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.GaveUp.WithLabelValues("bad")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.Failed.WithLabelValues("bad")), "the first attempt failed")
	require.Equal(t, 0.0, testutil.ToFloat64(m.InFlight))
	n, err := testutil.GatherAndCount(reg, "pgrelay_claim_duration_seconds", "pgrelay_handler_duration_seconds")
	require.NoError(t, err)
	require.Positive(t, n)
}

// Channel and lane actors are spawned on demand and stopped when idle.
func TestActorIdleChannelActorsStop(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('i1', 'SELECT $1')`)
	e.Exec(`SELECT pgrelay.register('i2', 'SELECT $1', p_concurrency_mode := 'payload')`)
	p := e.startProcessor(func(c *actors.Config) { c.IdleTimeout = 200 * time.Millisecond })
	gauge := func() float64 { return testutil.ToFloat64(p.Metrics().ChannelActors) }
	require.Zero(t, gauge())
	e.Exec(`SELECT pgrelay.notify_many('i1', ARRAY['a', 'b'])`)
	e.Exec(`SELECT pgrelay.notify_many('i2', ARRAY['x', 'y', 'z'])`)
	testenv.Eventually(e.T, 10*time.Second, "5 events", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 5
	})
	// i1's actor, i2's actor and its lanes x, y, z were spawned...
	// ...and all are stopped once idle.
	testenv.Eventually(e.T, 10*time.Second, "idle actors to stop", func() bool { return gauge() == 0 })
	// A new event spawns a fresh actor that runs it.
	e.Exec(`SELECT pgrelay.notify('i2', 'x')`)
	testenv.Eventually(e.T, 10*time.Second, "the later event", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 6
	})
}

// The janitor keeps the log rows that the NATS publisher of their node has
// not published yet; past the cap (--log-retention-unpublished) it deletes
// them all the same, and says so loudly: an error log with the count and the
// id range, a counter, and a row in pgrelay.log_dropped.
func TestActorJanitorKeepsUnpublishedLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	insert := func(node int, age string, channel string) {
		e.Exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, at)
		        SELECT pgrelay._id_floor(now() - $2::interval) + ($1::bigint << 12) + g, g, g, $3, 1, 'succeeded', $1,
		               now() - $2::interval
		          FROM generate_series(1, 100) g`, node, age, channel)
	}
	insert(0, "10 days", "old")         // node 0 has no publisher: trimmed at the retention
	insert(3, "10 days", "unpublished") // node 3's publisher has not published these
	insert(4, "40 days", "ancient")     // unpublished, past the cap
	e.Exec(`INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (3, 'log', 0), (4, 'log', 0)`)
	logs := &syncBuffer{}
	reg := prometheus.NewRegistry()
	p := e.startProcessor(func(c *actors.Config) {
		c.LogRetention = 7 * 24 * time.Hour
		c.Registerer = reg
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	testenv.Eventually(e.T, 30*time.Second, "the old log rows to be trimmed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel IN ('old', 'ancient')`) == 0
	})
	require.Equal(t, 100, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'unpublished'`),
		"unpublished rows are kept")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log_dropped WHERE node = 4 AND rows = 100
		AND first_at < now() - interval '39 days'`))
	// The counter and the log line come just after the delete commits.
	testenv.Eventually(e.T, 10*time.Second, "the drop to be reported", func() bool {
		return testutil.ToFloat64(p.Metrics().LogUnpublishedDropped) == 100
	})
	require.Regexp(t, `level=ERROR msg="deleted log rows that were never published on NATS[^"]*" .*rows=100 first_id=\d+ last_id=\d+`,
		logs.String())
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
