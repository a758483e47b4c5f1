package cli_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/version"
	"github.com/pgrelay/pgrelay/processor"
)

// `pgrelay stats` shows each publisher's lag, rows and age of the oldest
// unpublished event, and what retention dropped unpublished.
func TestStatsPublisherLag(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node, at)
		SELECT pgrelay._id_floor(now() - interval '2 hours') + g, g, g, 'c', 1, 'succeeded', 0, now() - interval '2 hours'
		  FROM generate_series(1, 3) g`)
	d.Exec(`INSERT INTO pgrelay.publish_cursors (node_id, source, last_id) VALUES (0, 'log', 0), (1, 'log', 0)`)
	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^unpublished events \(node 0\): 3, the oldest 2h0m\d+s old$`, out)
	assert.Regexp(t, `(?m)^unpublished events \(node 1\): 0$`, out)

	d.Exec(`INSERT INTO pgrelay.log_dropped (node, rows, first_id, last_id, first_at, last_at)
		VALUES (1, 5000, 10, 5009, now() - interval '31 days', now() - interval '30 days'),
		       (1, 2, 5010, 5011, now() - interval '30 days', now() - interval '30 days')`)
	code, out, errOut = cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^unpublished events deleted by retention \(node 1\): 5002, ids 10\.\.5011, the last \S+ ago; see pgrelay\.log_dropped$`, out)
}

// `pgrelay stats` says why a go channel's events wait: no Processor of the
// node has its handler.
func TestStatsUnhandledGoChannels(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec("SELECT pgrelay.register('charge_card', 'charge', p_kind := 'go')")
	d.Exec("SELECT pgrelay.register('refund_card', 'refund', p_kind := 'go')")
	d.Exec("SELECT pgrelay.notify('charge_card', 'c1'), pgrelay.notify('charge_card', 'c2')")
	// A running Processor that has 'refund'.
	d.Exec("INSERT INTO pgrelay.processors (processor_id, node_id, mode) VALUES (1, 0, 'single')")
	d.Exec("SELECT pgrelay._go_handlers_set(1, ARRAY['refund'])")
	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^channel charge_card: no Processor of this node handles go handler 'charge'; its 2 pending events wait$`, out)
	assert.NotContains(t, out, "'refund'")
}

// `pgrelay stats` shows the events being cancelled that have not ended: a
// running attempt finishes first.
func TestStatsCancelsWaiting(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec("SELECT pgrelay.register('c', 'SELECT 1')")
	d.Exec("SELECT pgrelay.notify('c', 'a'), pgrelay.notify('c', 'b')")
	d.Exec("UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1")
	d.Exec("SELECT pgrelay.cancel(id) FROM pgrelay.queue")
	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^channel c: 2 events being cancelled \(a running attempt finishes first\)$`, out)
}

// `pgrelay stats` lists the schedules: timing, node, next and last fire,
// events, last error.
func TestStatsSchedules(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec("SELECT pgrelay.register('reports', 'SELECT length($1)')")
	d.Exec("SELECT pgrelay.schedule('nightly', 'reports', 'n', p_cron := '0 3 * * *', p_timezone := 'Europe/Paris')")
	d.Exec("SELECT pgrelay.schedule('ping', 'reports', 'p', p_every := '5 minutes')")
	d.Exec(`UPDATE pgrelay.schedule_defs SET last_fire = now() - interval '1 hour', fires = 7,
		last_error = 'notify failed: x' WHERE name = 'ping'`)
	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^schedule nightly \(channel reports, cron '0 3 \* \* \*' Europe/Paris, node 0\): next not computed yet, never fired, 0 events$`, out)
	assert.Regexp(t, `(?m)^schedule ping \(channel reports, every 00:05:00, node 0\): next in (4m5\ds|5m0s), last fired 1h0m\d+s ago, 7 events; last error: notify failed: x$`, out)
}

// `pgrelay stats` lists the running Processors, an embedded one (the
// processor package, in this test's process) as `pgrelay run` (a
// subprocess): each with its node, mode, host, pid, release and whether it
// is alive.
func TestStatsProcessors(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^no Processor is running$`, out)

	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	p, err := processor.NewProcessor(processor.Config{DatabaseURL: d.URL,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	require.NoError(t, err)
	p.Handle("ship", func(context.Context, pgrelay.Event) error { return nil })
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	run := startCLI(t, nil, "run", "--database-url", d.URL)
	testenv.Eventually(t, 60*time.Second, "both Processors to start", func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.processors") == 2 || run.exited()
	})
	require.False(t, run.exited(), "pgrelay run exited")

	node := d.Text("SELECT pgrelay._this_node()::text")
	code, out, errOut = cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	for _, pid := range []int{os.Getpid(), run.cmd.Process.Pid} {
		assert.Regexp(t, `(?m)^processor \d+ on node `+node+` \(single, host \S+, pid `+strconv.Itoa(pid)+`\): `+
			`version `+regexp.QuoteMeta(version.Release)+`, alive, last heartbeat \d+s ago$`, out)
	}
	assert.NotContains(t, out, "no Processor is running")
	run.signal(syscall.SIGTERM)
	require.Equal(t, 0, run.wait(60*time.Second))
}
