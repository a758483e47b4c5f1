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
)

// pgrelay run --metrics-addr serves /metrics and /healthz.
func TestRunServesMetricsAndHealthz(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(`SELECT pgrelay.register('m', 'SELECT $1')`)
	d.exec(`SELECT pgrelay.notify('m', 'x')`)
	p := startCLI(t, nil, "run", "--database-url", d.url, "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	addrRe := regexp.MustCompile(`msg="serving metrics".* addr=(127\.0\.0\.1:\d+)`)
	var addr string
	eventually(t, 30*time.Second, "the metrics server", func() bool {
		if m := addrRe.FindStringSubmatch(p.stderr.String()); m != nil {
			addr = m[1]
			return true
		}
		return false
	})
	eventually(t, 30*time.Second, "the event to succeed", func() bool {
		return d.count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 1
	})
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + addr + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/healthz")
	require.Equal(t, 200, code)
	require.Equal(t, "ok\n", body)
	// The counters move just after the commit that the log query sees, so
	// poll the endpoint until they show the finished event.
	eventually(t, 30*time.Second, "the metrics to count the event", func() bool {
		code, body = get("/metrics")
		require.Equal(t, 200, code)
		return strings.Contains(body, `pgrelay_succeeded_total{channel="m"} 1`) &&
			strings.Contains(body, "pgrelay_in_flight 0")
	})
	require.Contains(t, body, "pgrelay_claim_duration_seconds_bucket")
	p.signal(syscall.SIGTERM)
	require.Equal(t, 0, p.wait(30*time.Second))
}
