package migrations_test

// Periodic events: the documented recipe, pg_cron calling pgrelay.notify()
// (docs/user-guide.md, "Periodic events"). pg_cron is not a dependency: the
// test runs where the postgresql-15-cron package is installed and skips
// otherwise.

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
)

func TestPeriodicEventsWithPgCron(t *testing.T) {
	t.Parallel()
	if out, err := exec.Command("dpkg", "-s", "postgresql-15-cron").Output(); err != nil ||
		!strings.Contains(string(out), "Status: install ok installed") {
		t.Skip("postgresql-15-cron is not installed: the pg_cron recipe for periodic events is not tested")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	// pg_cron is loaded at server start and keeps its jobs in the database
	// cron.database_name names; background workers run them (no connection
	// and so no password).
	p, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{Settings: map[string]string{
		"shared_preload_libraries":    "'pg_cron'",
		"cron.database_name":          "'postgres'",
		"cron.use_background_workers": "on",
		"max_worker_processes":        "16",
	}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = p.Stop() })
	url, err := p.NewDatabase(ctx, "cron")
	require.NoError(t, err)
	app, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { _ = app.Close(context.Background()) })
	db := app.Config().Database

	// The recipe: a channel that deduplicates (a tick that finds the last
	// one still pending adds nothing), a role that may notify, and the job,
	// scheduled from the cron database into the application's.
	_, err = app.Exec(ctx, `SELECT pgrelay.register('report', 'SELECT length($1)', p_deduplicate := true)`)
	require.NoError(t, err)
	_, err = app.Exec(ctx, `CREATE ROLE reporter LOGIN IN ROLE pgrelay_producer`)
	require.NoError(t, err)
	require.NoError(t, p.Exec(ctx, "postgres", `CREATE EXTENSION pg_cron`))
	cron, err := pgx.Connect(ctx, p.URL("postgres"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cron.Close(context.Background()) })
	var job int64
	require.NoError(t, cron.QueryRow(ctx, `SELECT cron.schedule_in_database('pgrelay-report', '* * * * *',
		$$SELECT pgrelay.notify('report', 'nightly')$$, $1, 'reporter')`, db).Scan(&job))

	// pg_cron runs at most once a minute: the first run comes within one.
	deadline := time.Now().Add(90 * time.Second)
	for {
		var n int
		require.NoError(t, app.QueryRow(ctx, `SELECT count(*) FROM pgrelay.queue WHERE channel = 'report' AND payload = 'nightly'`).Scan(&n))
		if n > 0 {
			require.Equal(t, 1, n)
			break
		}
		var status, msg *string
		err := cron.QueryRow(ctx, `SELECT status, return_message FROM cron.job_run_details WHERE jobid = $1
			ORDER BY runid DESC LIMIT 1`, job).Scan(&status, &msg)
		if err == nil && status != nil && *status == "failed" {
			t.Fatalf("the cron job failed: %v", *msg)
		}
		require.False(t, time.Now().After(deadline), "no event from the cron job within 90 s (job %d)", job)
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
	var user string
	require.NoError(t, cron.QueryRow(ctx, `SELECT username FROM cron.job WHERE jobid = $1`, job).Scan(&user))
	require.Equal(t, "reporter", user, "the job runs as the producer role")
	_, err = cron.Exec(ctx, `SELECT cron.unschedule($1::bigint)`, job)
	require.NoError(t, err)
}
