package actors_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
)

// The janitor deletes log rows past the retention and keeps the rest.
func TestActorJanitorTrimsLog(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, at)
	        SELECT pgrelay._id_floor(now() - interval '10 days') + n, n, n, 'old', 1, 'succeeded', now() - interval '10 days'
	          FROM generate_series(1, 12000) n`)
	e.exec(`INSERT INTO pgrelay.log (queue_id, origin_id, channel, attempt, event)
	        SELECT n, n, 'new', 1, 'succeeded' FROM generate_series(1, 10) n`)
	e.startProcessor(func(c *actors.Config) { c.LogRetention = 7 * 24 * time.Hour })
	e.eventually(30*time.Second, "old log rows to be trimmed", func() bool {
		return e.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'old'`) == 0
	})
	require.Equal(t, 10, e.count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'new'`))
}

// The Processor's metrics count what happened.
func TestActorMetrics(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.exec(`SELECT pgrelay.register('m', 'SELECT $1')`)
	e.exec(`SELECT pgrelay.register('bad', 'SELECT 1/0 WHERE $1 IS NOT NULL', p_max_attempts := 1)`)
	reg := prometheus.NewRegistry()
	p := e.startProcessor(func(c *actors.Config) { c.Registerer = reg })
	e.exec(`SELECT pgrelay.notify_many('m', ARRAY['1', '2', '3'])`)
	e.exec(`SELECT pgrelay.notify('bad', 'x')`)
	e.eventually(10*time.Second, "4 outcomes", func() bool {
		return e.count(`SELECT count(*) FROM pgrelay.log`) == 4
	})
	m := p.Metrics()
	require.Equal(t, 3.0, testutil.ToFloat64(m.Succeeded.WithLabelValues("m")))
	require.Equal(t, 3.0, testutil.ToFloat64(m.Claimed.WithLabelValues("m")))
	require.Equal(t, 1.0, testutil.ToFloat64(m.GaveUp.WithLabelValues("bad")))
	require.Equal(t, 0.0, testutil.ToFloat64(m.InFlight))
	n, err := testutil.GatherAndCount(reg, "pgrelay_claim_duration_seconds", "pgrelay_handler_duration_seconds")
	require.NoError(t, err)
	require.Positive(t, n)
}
