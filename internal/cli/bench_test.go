package cli_test

import (
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
)

// pgrelay bench at a tiny size: the figures come from real completions (the
// log holds one success per event), and bad flags are usage errors.
func TestBenchBurnDown(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	code, out, errOut := cliMain("bench", "--database-url", d.url, "--events", "2000", "--log-level", "warn")
	require.Equal(t, 0, code, errOut)
	m := regexp.MustCompile(`burn-down \(claim, run, complete\):\s+(\d+) events/s`).FindStringSubmatch(out)
	require.NotNil(t, m, out)
	rate, err := strconv.Atoi(m[1])
	require.NoError(t, err)
	require.Positive(t, rate)
	require.Regexp(t, `enqueue \(notify_many x 1000\):\s+\d+ events/s`, out)
	require.Equal(t, 2000, d.count(`SELECT count(DISTINCT origin_id) FROM pgrelay.log
		WHERE channel = 'pgrelay_bench_noop' AND event = 'succeeded'`))
	require.Equal(t, 0, d.count(`SELECT count(*) FROM pgrelay.queue`))

	for _, args := range [][]string{
		{"bench", "--events", "0"},
		{"bench", "--peer", "sidekiq"},
		{"bench", "--sql-batch", "0"},
	} {
		code, _, errOut := cliMain(args...)
		require.Equal(t, 2, code, "%v: %s", args, errOut)
	}
}
