package cli_test

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/version"
)

// pgrelay run --metrics-addr serves /metrics and /healthz.
func TestRunServesMetricsAndHealthz(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('m', 'SELECT $1')`)
	d.Exec(`SELECT pgrelay.notify('m', 'x')`)
	// A paused channel with a backlog and nothing run yet.
	d.Exec(`SELECT pgrelay.register('quiet', 'SELECT $1')`)
	d.Exec(`SELECT pgrelay.update('quiet', p_paused := true)`)
	d.Exec(`SELECT pgrelay.notify_many('quiet', ARRAY['a', 'b'])`)
	// A channel whose one event becomes a dead letter.
	d.Exec(`SELECT pgrelay.register('bad', 'SELECT 1/0', p_max_attempts := 1)`)
	d.Exec(`SELECT pgrelay.notify('bad', 'x')`)
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	get := metricsServer(t, p)
	testenv.Eventually(t, 30*time.Second, "the events to end", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1 &&
			d.Count(`SELECT count(*) FROM pgrelay.dead_letters`) == 1
	})
	code, body := get("/healthz")
	require.Equal(t, 200, code)
	require.Equal(t, "ok\n", body)
	// The counters move just after the commit that the log query sees, so
	// poll the endpoint until they show the finished event.
	testenv.Eventually(t, 30*time.Second, "the metrics to count the event", func() bool {
		code, body = get("/metrics")
		require.Equal(t, 200, code)
		return strings.Contains(body, `pgrelay_succeeded_total{channel="m"} 1`) &&
			strings.Contains(body, "pgrelay_processor_slots_in_use 0")
	})
	require.Contains(t, body, "pgrelay_claim_duration_seconds_bucket")
	// Counters exist at zero for every registered channel and every
	// operation, before anything happened to them: alerts on them are not
	// blind. The backlog gauges come from queue_stats().
	testenv.Eventually(t, 30*time.Second, "the quiet channel's counters at zero", func() bool {
		_, body = get("/metrics")
		return strings.Contains(body, `pgrelay_failed_total{channel="quiet"} 0`)
	})
	for _, want := range []string{
		`pgrelay_succeeded_total{channel="quiet"} 0`,
		`pgrelay_gave_up_total{channel="quiet"} 0`,
		`pgrelay_gave_up_total{channel="m"} 0`,
		`pgrelay_expired_total{channel="quiet"} 0`,
		`pgrelay_db_errors_total{op="claim"} 0`,
		`pgrelay_db_errors_total{op="queue_stats"} 0`,
		`pgrelay_queue_pending{channel="quiet"} 2`,
		`pgrelay_queue_pending{channel="m"} 0`,
		`pgrelay_queue_in_flight{channel="quiet"} 0`,
		`pgrelay_queue_retrying{channel="quiet"} 0`,
		`pgrelay_queue_paused{channel="quiet"} 1`,
		`pgrelay_queue_paused{channel="m"} 0`,
		`pgrelay_queue_oldest_pending_age_seconds{channel="m"} 0`,
		// The dead letters, per registered channel (0 when none).
		`pgrelay_dead_letters{channel="bad"} 1`,
		`pgrelay_dead_letters{channel="m"} 0`,
		`pgrelay_dead_letters_oldest_age_seconds{channel="m"} 0`,
		// This Processor heartbeats: its node has one live Processor.
		`pgrelay_processors_alive{node="0"} 1`,
	} {
		require.Contains(t, body, want)
	}
	require.Regexp(t, `pgrelay_queue_oldest_pending_age_seconds\{channel="quiet"\} [0-9.e+-]+`, body)
	require.Regexp(t, `pgrelay_dead_letters_oldest_age_seconds\{channel="bad"\} [0-9.e+-]+`, body)
	// The slots of this Processor are not named like the database's
	// in-flight events (pgrelay_queue_in_flight).
	require.NotRegexp(t, `(?m)^pgrelay_in_flight `, body)
	// Nothing about Spock on a database without it, and no NATS metrics
	// without --nats-url (pgrelay_nats_connected 0 would look like an
	// outage).
	require.NotContains(t, body, `op="spock_status"`)
	require.NotContains(t, body, "pgrelay_nats_")
	require.NotContains(t, body, "pgrelay_events_")
	// The release, as the source names it: in the metrics, in
	// pgrelay.processors (the console's) and in pgrelay nodes.
	require.Contains(t, body, `pgrelay_build_info{version="`+version.Release+`"} 1`)
	require.Equal(t, version.Release, d.Text(`SELECT version FROM pgrelay.processors`))
	code, out, errOut := cliMain("nodes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, " "+version.Release+"\n")
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
}

// metricsServer waits for the metrics server of a `pgrelay run
// --metrics-addr 127.0.0.1:0 --log-level info` to say where it listens, and
// returns a GET of a path there: the status and the body.
func metricsServer(t *testing.T, p *proc) func(path string) (int, string) {
	t.Helper()
	addrRe := regexp.MustCompile(`msg="serving metrics".* addr=(127\.0\.0\.1:\d+)`)
	var addr string
	testenv.Eventually(t, 30*time.Second, "the metrics server", func() bool {
		if m := addrRe.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		return p.exited()
	})
	require.NotEmpty(t, addr, "the metrics server's address")
	return func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
}

// pgrelay web --metrics-addr serves the database's gauges with no Processor
// running: after the only Processor is killed (SIGKILL, no goodbye), the
// backlog still shows, and the node's live Processors drop to 0 once its
// heartbeat is older than --dead-after.
func TestWebServesDatabaseMetricsWithoutProcessor(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('w', 'SELECT $1')`)
	d.Exec(`SELECT pgrelay.register('bad', 'SELECT 1/0', p_max_attempts := 1)`)
	d.Exec(`SELECT pgrelay.notify('bad', 'x')`)
	run := startCLI(t, nil, "run", "--database-url", d.URL, "--heartbeat-interval", "200ms", "--dead-after", "2s")
	testenv.Eventually(t, 30*time.Second, "the dead letter", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.dead_letters`) == 1
	})
	web := startCLI(t, nil, "web", "--database-url", d.URL, "--addr", "127.0.0.1:0",
		"--metrics-addr", "127.0.0.1:0", "--dead-after", "2s", "--log-level", "info")
	get := metricsServer(t, web)
	testenv.Eventually(t, 30*time.Second, "one live Processor", func() bool {
		_, body := get("/metrics")
		return strings.Contains(body, `pgrelay_processors_alive{node="0"} 1`)
	})
	run.signal(syscall.SIGKILL)
	require.Equal(t, -1, run.wait(30*time.Second))
	d.Exec(`SELECT pgrelay.notify_many('w', $1)`, []string{"a", "b", "c"})
	var body string
	testenv.Eventually(t, 30*time.Second, "no live Processor", func() bool {
		_, body = get("/metrics")
		return strings.Contains(body, `pgrelay_processors_alive{node="0"} 0`)
	})
	for _, want := range []string{
		`pgrelay_queue_pending{channel="w"} 3`,
		`pgrelay_queue_paused{channel="w"} 0`,
		`pgrelay_dead_letters{channel="bad"} 1`,
		`pgrelay_dead_letters{channel="w"} 0`,
		`pgrelay_db_errors_total{op="queue_stats"} 0`,
	} {
		require.Contains(t, body, want)
	}
	require.Regexp(t, `pgrelay_queue_oldest_pending_age_seconds\{channel="w"\} [0-9.e+-]+`, body)
	// Only the database's gauges: the Processor's own metrics belong to
	// Processors.
	require.NotContains(t, body, "pgrelay_succeeded_total")
	require.NotContains(t, body, "pgrelay_processor_slots_in_use")
	code, health := get("/healthz")
	require.Equal(t, 200, code)
	require.Equal(t, "ok\n", health)
	web.signal(syscall.SIGTERM)
	require.Equal(t, 0, web.wait(30*time.Second))
}
