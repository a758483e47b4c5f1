package migrations_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// viewerReads are the statements of what the console reads.
var viewerReads = []string{
	"SELECT count(*) FROM pgrelay.nodes_overview('10 seconds')",
	"SELECT count(*) FROM pgrelay.channels",
	"SELECT count(*) FROM pgrelay.queue",
	"SELECT count(*) FROM pgrelay.log WHERE id >= pgrelay._id_floor(now() - interval '1 hour')",
	"SELECT count(*) FROM pgrelay.nodes",
	"SELECT count(*) FROM pgrelay.processors",
	"SELECT count(*) FROM pgrelay.event_payloads",
	"SELECT count(*) FROM pgrelay.dead_letters",
	"SELECT count(*) FROM pgrelay.schema_migrations",
	"SELECT count(*) FROM pgrelay.unhandled_go_channels()",
	"SELECT notification_id, channel, to_addrs, subject, status, attempts, last_error, created_at, updated_at, sent_at, sending_event, send_in_doubt FROM pgrelay_notifier.notifications",
	"SELECT count(*) FROM pgrelay_notifier.status_events",
	"SELECT count(*) FROM pgrelay_notifier.debug_log",
}

// pgrelay_admin reads every pgrelay table, and so all the console reads:
// it is a member of pgrelay_viewer.
func TestRoleAdminReadsWhatTheViewerReads(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	a := d.loginAs("admin", "pgrelay_admin")
	for _, sql := range viewerReads {
		require.NoError(t, execErr(a, sql), sql)
	}
	require.True(t, testenv.One[bool](t, d.Pool, "SELECT pg_has_role('pgrelay_admin', 'pgrelay_viewer', 'MEMBER')"))
}

// pgrelay_viewer reads what the console shows, and changes nothing: no
// enqueue, no channel, no queue or log row, and no email body.
func TestRoleViewer(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("c", "")
	d.Exec("SELECT pgrelay_notifier.create_channel('mail', 'Shop <shop@example.com>')")
	nid := testenv.One[int64](t, d.Pool, "SELECT pgrelay_notifier.send('mail', ARRAY['a@example.com'], 'Hi', 'secret body')")
	id := testenv.One[int64](t, d.Pool, "SELECT pgrelay.notify('c', 'x')")
	v := d.loginAs("viewer", "pgrelay_viewer")

	require.Equal(t, "pending", testenv.One[string](t, v, "SELECT pgrelay.status($1)", id))
	require.EqualValues(t, 1, testenv.One[int64](t, v, "SELECT pending FROM pgrelay.queue_stats() WHERE channel = 'c'"))
	for _, sql := range viewerReads {
		require.NoError(t, execErr(v, sql), sql)
	}
	for _, sql := range []string{
		"SELECT pgrelay.notify('c', 'y')",
		"SELECT pgrelay.register('d', 'SELECT length($1)')",
		"SELECT pgrelay.update('c', p_paused := true)",
		"INSERT INTO pgrelay.queue (channel, payload) VALUES ('c', 'x')",
		"DELETE FROM pgrelay.log",
		"UPDATE pgrelay.channels SET paused = true",
		"SELECT body_text FROM pgrelay_notifier.notifications",
		"SELECT bcc_addrs FROM pgrelay_notifier.notifications",
		"SELECT pgrelay_notifier.cancel(" + itoa(nid) + ")",
		"SELECT pgrelay_notifier.send('mail', ARRAY['b@example.com'], 'x', 'y')",
		"SELECT * FROM pgrelay._claim(1, 'single', false, 10, '{sql}')",
		"SELECT pgrelay.retry(1)",
		"SELECT pgrelay.retry_all('c')",
		"SELECT pgrelay.discard(1)",
		"SELECT pgrelay.discard_all('c')",
		"DELETE FROM pgrelay.dead_letters",
	} {
		requireCode(t, execErr(v, sql), insufficientPrivilege, sql)
	}
}
