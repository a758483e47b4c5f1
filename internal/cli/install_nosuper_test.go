package cli_test

import (
	"context"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// The DBA guide's install without a superuser, on a cluster of its own (the
// pgrelay roles are cluster-wide, and this install must create them): an
// owner login with only CREATEROLE and CREATE on the database runs `pgrelay
// migrate`; then an sql channel and an email channel work end to end with a
// producer login and a Processor login that hold only the pgrelay roles
// (and, for the handler, INSERT on its table).
func TestInstallWithoutSuperuser(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cluster, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop() })
	mail, err := devenv.StartSMTP(devenv.SMTPConfig{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = mail.Close() })

	super := func(db, sql string) {
		t.Helper()
		require.NoError(t, cluster.Exec(ctx, db, sql), sql)
	}
	super("postgres", "CREATE ROLE owner LOGIN CREATEROLE")
	super("postgres", "CREATE DATABASE app")
	super("postgres", "GRANT CREATE ON DATABASE app TO owner")
	as := func(role string) string {
		return strings.Replace(cluster.URL("app"), "postgres://postgres@", "postgres://"+role+"@", 1)
	}

	code, out, errOut := runCLI(t, nil, "migrate", "--database-url", as("owner"))
	require.Equal(t, 0, code, "migrate as a non-superuser owner:\n%s%s", out, errOut)
	// The owner can't see other sessions' transactions: the NATS publisher
	// would stall, and migrate says so with the fix.
	require.Contains(t, errOut, "pgrelay migrate: warning: owner, the owner of the schema, is neither a superuser nor a member of pg_read_all_stats")
	require.Contains(t, errOut, `GRANT pg_read_all_stats TO "owner";`)
	super("postgres", "GRANT pg_read_all_stats TO owner")
	code, _, errOut = runCLI(t, nil, "migrate", "--database-url", as("owner"))
	require.Equal(t, 0, code, errOut)
	require.Empty(t, errOut, "no warning once granted")

	own, err := pgx.Connect(ctx, as("owner"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = own.Close(context.Background()) })
	for _, sql := range []string{
		// The application's side, as its owner would set it up.
		"CREATE SCHEMA shop",
		"CREATE TABLE shop.shipped (payload text)",
		"CREATE ROLE relay LOGIN IN ROLE pgrelay_processor",
		"CREATE ROLE web LOGIN IN ROLE pgrelay_producer",
		"GRANT USAGE ON SCHEMA shop TO relay",
		"GRANT INSERT ON shop.shipped TO relay",
		"SELECT pgrelay.register('ship', 'INSERT INTO shop.shipped VALUES ($1)')",
		"SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')",
	} {
		_, err := own.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}

	web, err := pgx.Connect(ctx, as("web"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = web.Close(context.Background()) })
	_, err = web.Exec(ctx, "SELECT pgrelay.notify('ship', 'order-1')")
	require.NoError(t, err)
	var nid int64
	require.NoError(t, web.QueryRow(ctx,
		"SELECT pgrelay_notifier.send('mail', ARRAY['you@example.com'], 'Shipped', 'Your order is on its way')").Scan(&nid))

	p := startCLI(t, nil, "run", "--database-url", as("relay"), "--smtp-url", mail.URL())
	// The mail server has the message before the Processor records it sent:
	// wait for both.
	var status string
	testenv.Eventually(t, 60*time.Second, "the handler's row, the email and its status", func() bool {
		var n int
		_ = own.QueryRow(ctx, "SELECT count(*) FROM shop.shipped WHERE payload = 'order-1'").Scan(&n)
		require.NoError(t, web.QueryRow(ctx, "SELECT pgrelay_notifier.get_status($1)", nid).Scan(&status))
		return (n == 1 && mail.Count() == 1 && status == "sent") || p.exited()
	})
	require.False(t, p.exited(), "the Processor exited")
	require.Equal(t, "sent", status)
	require.Equal(t, 1, mail.Count())
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second))

	// A dead letter retried by an admin login: retry() runs as the owner and
	// puts the email's failed notification back to queued through the
	// notifier, and the retried event sends it.
	for _, sql := range []string{
		"CREATE ROLE ops LOGIN IN ROLE pgrelay_admin",
		"SELECT pgrelay_notifier.create_channel('late', 'Shop <shop@example.com>', p_expire_after := '1 hour')",
	} {
		_, err := own.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	require.NoError(t, web.QueryRow(ctx,
		"SELECT pgrelay_notifier.send('late', ARRAY['you@example.com'], 'Late', 'Expired, then retried')").Scan(&nid))
	_, err = own.Exec(ctx, "UPDATE pgrelay.queue SET expires_at = now() - interval '1 second' WHERE payload = $1", strconv.FormatInt(nid, 10))
	require.NoError(t, err)
	ops, err := pgx.Connect(ctx, as("ops"))
	require.NoError(t, err)
	t.Cleanup(func() { _ = ops.Close(context.Background()) })
	p = startCLI(t, nil, "run", "--database-url", as("relay"), "--smtp-url", mail.URL())
	testenv.Eventually(t, 60*time.Second, "the expired email's dead letter and its failed notification", func() bool {
		var n int
		require.NoError(t, ops.QueryRow(ctx, "SELECT count(*) FROM pgrelay.dead_letters WHERE notification_id = $1", nid).Scan(&n))
		require.NoError(t, web.QueryRow(ctx, "SELECT pgrelay_notifier.get_status($1)", nid).Scan(&status))
		return (n == 1 && status == "failed") || p.exited()
	})
	require.False(t, p.exited(), "the Processor exited")
	_, err = ops.Exec(ctx, "SELECT pgrelay.retry(id) FROM pgrelay.dead_letters WHERE notification_id = $1", nid)
	require.NoError(t, err)
	testenv.Eventually(t, 60*time.Second, "the retried email sent", func() bool {
		require.NoError(t, web.QueryRow(ctx, "SELECT pgrelay_notifier.get_status($1)", nid).Scan(&status))
		return (status == "sent" && mail.Count() == 2) || p.exited()
	})
	require.Equal(t, "sent", status)
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(60*time.Second))
}
