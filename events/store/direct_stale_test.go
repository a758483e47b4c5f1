package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

// A handler prepared on a connection whose result type then changes (a
// column added to the table it selects *) fails once there, as its event's
// own error; the connection prepares it again, and the retry succeeds. One
// connection, so every batch meets the statement it prepared.
func TestDirectBatchHandlerResultTypeChanges(t *testing.T) {
	ctx := context.Background()
	cfg := pg.Pool(t).Config().Copy()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	s := New(pool, nil, &Statements{})
	for _, sql := range []string{
		`CREATE TABLE public.t (k text)`,
		`INSERT INTO public.t VALUES ('x')`,
		`SELECT pgrelay.register('r', 'SELECT * FROM public.t WHERE k <> $1', p_retry_delay := '0', p_max_attempts := 3)`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	scope := ClaimScope{Mode: "single"}
	// run enqueues one event and runs the batch that takes it.
	run := func(notify bool) DirectEvent {
		t.Helper()
		if notify {
			_, err := pool.Exec(ctx, `SELECT pgrelay.notify('r', 'p')`)
			require.NoError(t, err)
		}
		b, err := s.RunDirect(ctx, scope, "r", 10)
		require.NoError(t, err)
		require.Len(t, b.Events, 1)
		return b.Events[0]
	}
	require.Equal(t, events.Succeeded, run(true).Outcome, "prepared on the connection")
	_, err = pool.Exec(ctx, `ALTER TABLE public.t ADD COLUMN extra int`)
	require.NoError(t, err)
	e := run(true)
	require.Equal(t, events.Failed, e.Outcome)
	require.ErrorContains(t, e.Err, "cached plan must not change result type")
	require.Equal(t, events.Succeeded, run(false).Outcome, "the retry, prepared again")
}
