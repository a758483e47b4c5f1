package bench_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/bench"
)

// The proxy counts a round trip each time the client speaks after the
// server did: one per statement sent alone, one for a pipelined batch.
func TestBenchRoundTripProxy(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, turns, stop, err := bench.StartRTProxy(pg.EmptyDB(t))
	require.NoError(t, err)
	defer stop()
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer conn.Close(ctx)
	before := turns()
	assert.Positive(t, before, "the start-up exchange")
	for range 25 {
		_, err := conn.Exec(ctx, "SELECT 1")
		require.NoError(t, err)
	}
	assert.Equal(t, int64(25), turns()-before, "25 statements, one after the other")
	batch := func() {
		b := &pgx.Batch{}
		for i := range 10 {
			b.Queue("SELECT $1::int", i)
		}
		require.NoError(t, conn.SendBatch(ctx, b).Close())
	}
	batch() // prepares the statement: a round trip of its own
	before = turns()
	batch()
	assert.Equal(t, int64(1), turns()-before, "10 prepared statements in one pipeline")
}

// The meter sees the server's CPU: a statement that computes for a while
// shows in it.
func TestBenchServerCPU(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pg.Pool(t)
	since, stop, err := bench.MeterServer(ctx, pool)
	require.NoError(t, err)
	defer stop()
	var n int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 5000000)`).Scan(&n))
	cpu, ok := since()
	require.True(t, ok, "the test server runs on this machine")
	assert.GreaterOrEqual(t, cpu, 10000.0, "5 million rows counted cost the server at least 10 ms of CPU")
}

// The meter reads the server's CPU to the nanosecond, not in clock ticks
// (10 ms): a burn-down of 2 000 events costs the server a few tens of
// milliseconds, which ticks could read as nothing at all (TestBenchPeerRiver
// found 0 µs an event). A statement of a few milliseconds shows, and not as
// a whole number of ticks.
func TestBenchServerCPUResolution(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := pg.Pool(t)
	read, err := bench.ServerCPUNS(ctx, pool)
	require.NoError(t, err)
	before, err := read()
	require.NoError(t, err)
	var n int64
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM generate_series(1, 20000)`).Scan(&n))
	after, err := read()
	require.NoError(t, err)
	d := after - before
	assert.Positive(t, d, "the statement ran on the server")
	assert.NotZero(t, d%10_000_000, "%d ns: a whole number of 10 ms ticks", d)
}
