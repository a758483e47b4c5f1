package store

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

// staleEnv is a Store on a pool of one connection, so that every batch
// meets the statements the batches before it prepared.
type staleEnv struct {
	t    *testing.T
	pool *pgxpool.Pool
	s    *Store
}

func newStaleEnv(t *testing.T, setup ...string) *staleEnv {
	t.Helper()
	cfg := pg.Pool(t).Config().Copy()
	cfg.MaxConns = 1
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	e := &staleEnv{t: t, pool: pool, s: New(pool, nil, &Statements{})}
	for _, sql := range setup {
		e.exec(sql)
	}
	return e
}

// staleHandler selects * from public.t, whose columns a test then changes,
// and counts its runs in public.runs.
const staleHandler = `SELECT *, pg_catalog.nextval('public.runs') FROM public.t WHERE k <> $1`

// newStaleChannel is a staleEnv with channel r ('none' mode, one attempt)
// running staleHandler.
func newStaleChannel(t *testing.T) *staleEnv {
	t.Helper()
	e := newStaleEnv(t,
		`CREATE TABLE public.t (k text)`,
		`INSERT INTO public.t VALUES ('x')`,
		`CREATE SEQUENCE public.runs`,
	)
	e.exec(`SELECT pgrelay.register('r', $1, p_max_attempts := 1)`, staleHandler)
	return e
}

func (e *staleEnv) exec(sql string, args ...any) {
	e.t.Helper()
	_, err := e.pool.Exec(context.Background(), sql, append([]any{pgx.QueryExecModeSimpleProtocol}, args...)...)
	require.NoError(e.t, err, sql)
}

func (e *staleEnv) count(sql string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), sql, pgx.QueryExecModeSimpleProtocol).Scan(&n), sql)
	return n
}

// preparedAs is how many of the connection's prepared statements are sql.
func (e *staleEnv) preparedAs(sql string) int {
	e.t.Helper()
	var n int
	require.NoError(e.t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM pg_prepared_statements WHERE statement = $1`,
		pgx.QueryExecModeSimpleProtocol, sql).Scan(&n))
	return n
}

// outcomes are the outcomes of a batch's events, by payload.
func outcomes(t *testing.T, b *DirectBatch) map[string]events.Kind {
	t.Helper()
	out := map[string]events.Kind{}
	for _, ev := range b.Events {
		require.NotContains(t, out, ev.Payload, "one round")
		out[ev.Payload] = ev.Outcome
		if ev.Outcome != events.Succeeded {
			require.Error(t, ev.Err)
			out[ev.Payload+" error"] = events.Kind(ev.Err.Error())
		}
	}
	return out
}

// A handler prepared on a connection whose result type then changes (a
// column added to the table it selects *) is prepared again and its event
// runs again in the same attempt: the change costs no attempt, neither to
// the event that met it first nor to the events after it in its pipeline,
// and every handler runs once.
func TestDirectBatchHandlerResultTypeChanges(t *testing.T) {
	e := newStaleChannel(t)
	const handler = staleHandler
	ctx := context.Background()
	scope := ClaimScope{Mode: "single"}
	e.exec(`SELECT pgrelay.notify('r', 'p0')`)
	b, err := e.s.RunDirect(ctx, scope, "r", 10)
	require.NoError(t, err)
	require.Equal(t, map[string]events.Kind{"p0": events.Succeeded}, outcomes(t, b))
	require.Equal(t, 1, e.preparedAs(handler), "prepared on the connection")

	e.exec(`ALTER TABLE public.t ADD COLUMN extra int`)
	e.exec(`SELECT pgrelay.notify_many('r', ARRAY['p1', 'p2', 'p3'])`)
	b, err = e.s.RunDirect(ctx, scope, "r", 10)
	require.NoError(t, err)
	require.Equal(t, map[string]events.Kind{"p1": events.Succeeded, "p2": events.Succeeded, "p3": events.Succeeded},
		outcomes(t, b))
	require.Equal(t, 2, e.preparedAs(handler), "the stale statement met, and the handler prepared again")
	require.Equal(t, 4, e.count(`SELECT last_value FROM public.runs`), "each handler ran once")
	require.Equal(t, 4, e.count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND attempt = 1`))
	require.Zero(t, e.count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
}

// In a lane batch, the events before the one whose statement went stale
// keep their outcome and are not run again (another channel's head, here),
// the stale one and those after it run once more each.
func TestLaneBatchHandlerResultTypeChanges(t *testing.T) {
	const handler = `SELECT *, pg_catalog.nextval('public.runs') FROM public.t WHERE k <> $1`
	e := newStaleEnv(t,
		`CREATE TABLE public.t (k text)`,
		`INSERT INTO public.t VALUES ('x')`,
		`CREATE SEQUENCE public.runs`,
		`CREATE SEQUENCE public.a_runs`,
		// Lanes are walked by channel: a's head runs first.
		`SELECT pgrelay.register('a', 'SELECT pg_catalog.nextval(''public.a_runs''), $1', p_concurrency_mode := 'channel', p_max_attempts := 1)`,
	)
	e.exec(`SELECT pgrelay.register('r', $1, p_concurrency_mode := 'payload', p_max_attempts := 1)`, handler)
	ctx := context.Background()
	scope := ClaimScope{Mode: "single"}
	e.exec(`SELECT pgrelay.notify('r', 'p0')`)
	b, err := e.s.RunLanes(ctx, scope, LaneKey{}, 10)
	require.NoError(t, err)
	require.Equal(t, map[string]events.Kind{"p0": events.Succeeded}, outcomes(t, b))

	e.exec(`ALTER TABLE public.t ADD COLUMN extra int`)
	e.exec(`SELECT pgrelay.notify('a', 'a1')`)
	e.exec(`SELECT pgrelay.notify_many('r', ARRAY['p1', 'p2', 'p3'])`)
	b, err = e.s.RunLanes(ctx, scope, LaneKey{}, 10)
	require.NoError(t, err)
	require.Equal(t, map[string]events.Kind{"a1": events.Succeeded, "p1": events.Succeeded, "p2": events.Succeeded,
		"p3": events.Succeeded}, outcomes(t, b))
	require.Equal(t, "a", b.Events[0].Channel, "the other channel's head ran first")
	require.Equal(t, 2, e.preparedAs(handler), "the stale statement met, and the handler prepared again")
	require.Equal(t, 1, e.count(`SELECT last_value FROM public.a_runs`), "the head before it ran once")
	require.Equal(t, 4, e.count(`SELECT last_value FROM public.runs`), "each handler ran once")
	require.Equal(t, 5, e.count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND attempt = 1`))
	require.Zero(t, e.count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
}

// A handler that fails with the stale-plan error again after it was
// prepared anew (here it raises the error itself) fails as its own error:
// each event runs again once, not more.
func TestDirectBatchStalePlanTwiceFails(t *testing.T) {
	e := newStaleEnv(t,
		`CREATE SEQUENCE public.runs`,
		`CREATE FUNCTION public.stale(p text) RETURNS void LANGUAGE plpgsql AS $$
		BEGIN
		  PERFORM pg_catalog.nextval('public.runs');
		  RAISE EXCEPTION USING ERRCODE = '0A000', MESSAGE = 'cached plan must not change result type';
		END $$`,
		`SELECT pgrelay.register('s', 'SELECT public.stale($1)', p_max_attempts := 1)`,
		`SELECT pgrelay.notify_many('s', ARRAY['p1', 'p2'])`,
	)
	b, err := e.s.RunDirect(context.Background(), ClaimScope{Mode: "single"}, "s", 10)
	require.NoError(t, err)
	require.Len(t, b.Events, 2)
	for _, ev := range b.Events {
		require.Equal(t, events.GaveUp, ev.Outcome)
		require.ErrorContains(t, ev.Err, "cached plan must not change result type")
	}
	require.Equal(t, 4, e.count(`SELECT last_value FROM public.runs`), "each handler ran twice")
	require.Equal(t, 2, e.count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up' AND error LIKE '%cached plan%'`))
}

// A claimed sql event run in a transaction of its own (--sql-batch 1) runs
// its statements prepared, as a batch does: the second event on the
// connection parses and plans none of them again. A handler whose result
// type changed meanwhile is prepared again and its event runs in the same
// attempt, its handler once.
func TestRunSQLPreparedStatements(t *testing.T) {
	e := newStaleChannel(t)
	const handler = staleHandler
	ctx := context.Background()
	var proc int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT pgrelay._processor_start('single', 'host', 1, 'test')`,
		pgx.QueryExecModeSimpleProtocol).Scan(&proc))
	run := func(payload string) {
		t.Helper()
		e.exec(`SELECT pgrelay.notify('r', $1)`, payload)
		claimed, _, _, err := e.s.Claim(ctx, proc, ClaimScope{Mode: "single"}, 10, []string{"sql"}, false, nil)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		require.NoError(t, e.s.RunSQL(ctx, proc, claimed[0]))
	}
	run("p0")
	require.Equal(t, 1, e.preparedAs(handler), "the handler is prepared on the connection")
	require.Equal(t, 1, e.preparedAs(succeedSQL), "so is the completion")
	prepared := e.count(`SELECT count(*) FROM pg_prepared_statements`)
	run("p1")
	require.Equal(t, prepared, e.count(`SELECT count(*) FROM pg_prepared_statements`), "nothing prepared again")

	e.exec(`ALTER TABLE public.t ADD COLUMN extra int`)
	run("p2")
	require.Equal(t, 2, e.preparedAs(handler), "the stale statement met, and the handler prepared again")
	require.Equal(t, 3, e.count(`SELECT last_value FROM public.runs`), "each handler ran once")
	require.Equal(t, 3, e.count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded' AND attempt = 1`))
	require.Zero(t, e.count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
}

// A handler the server no longer prepares (its function dropped) runs
// unprepared in RunSQL and fails as the event's own error; the connection
// comes back clean, and the next event, once the function is back, succeeds.
func TestRunSQLHandlerThatNoLongerParses(t *testing.T) {
	const handler = `SELECT public.work($1)`
	e := newStaleEnv(t,
		`CREATE TABLE public.ran (p text)`,
		`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS 'INSERT INTO public.ran VALUES (p)'`,
	)
	e.exec(`SELECT pgrelay.register('w', $1)`, handler)
	e.exec(`DROP FUNCTION public.work(text)`)
	ctx := context.Background()
	var proc int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT pgrelay._processor_start('single', 'host', 1, 'test')`,
		pgx.QueryExecModeSimpleProtocol).Scan(&proc))
	run := func(payload string) error {
		t.Helper()
		e.exec(`SELECT pgrelay.notify('w', $1)`, payload)
		claimed, _, _, err := e.s.Claim(ctx, proc, ClaimScope{Mode: "single"}, 10, []string{"sql"}, false, nil)
		require.NoError(t, err)
		require.Len(t, claimed, 1)
		return e.s.RunSQL(ctx, proc, claimed[0])
	}
	err := run("p0")
	var herr *HandlerError
	require.ErrorAs(t, err, &herr)
	require.ErrorContains(t, err, "does not exist")
	// The pool kept its one connection (it closes one given back inside a
	// transaction): its prepared BEGIN is still there. The event's row
	// stays claimed, for the caller to record.
	require.Equal(t, 1, e.preparedAs("BEGIN"))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_by IS NOT NULL`))
	e.exec(`CREATE FUNCTION public.work(p text) RETURNS void LANGUAGE sql AS 'INSERT INTO public.ran VALUES (p)'`)
	require.NoError(t, run("p1"))
	require.Equal(t, 1, e.count(`SELECT count(*) FROM public.ran WHERE p = 'p1'`))
	require.Zero(t, e.count(`SELECT count(*) FROM public.ran WHERE p = 'p0'`))
}
