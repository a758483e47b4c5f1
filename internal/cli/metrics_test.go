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
	p := startCLI(t, nil, "run", "--database-url", d.URL, "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	get := metricsServer(t, p)
	testenv.Eventually(t, 30*time.Second, "the event to succeed", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1
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
			strings.Contains(body, "pgrelay_in_flight 0")
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
	} {
		require.Contains(t, body, want)
	}
	require.Regexp(t, `pgrelay_queue_oldest_pending_age_seconds\{channel="quiet"\} [0-9.e+-]+`, body)
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
