package devenv

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A clean-clone run failed with a Spock subscription down: every apply
// worker Spock started failed on a replication origin held by PID 11072,
// whose own lines had left the log's tail. The holders are found by the
// error's PID, each with the lines it logged.
func TestOriginHolderLogs(t *testing.T) {
	log := `2026-12-06 04:45:30.100 UTC [11072] LOG:  starting apply for subscription sub_n1_n2
2026-12-06 04:45:30.200 UTC [11123] LOG:  logical decoding found consistent point at 0/190BA68
2026-12-06 04:45:42.796 UTC [11366] ERROR:  replication origin with ID 1 is already active for PID 11072
2026-12-06 04:45:42.798 UTC [10712] LOG:  background worker "spock apply 16384:2979946351" (PID 11366) exited with exit code 1
2026-12-06 04:45:47.806 UTC [11494] ERROR:  replication origin with ID 1 is already active for PID 11072
2026-12-06 04:45:48.000 UTC [11072] LOG:  still connecting
2026-12-06 04:45:49.000 UTC [11500] ERROR:  replication origin with ID 2 is already active for PID 999
`
	got := originHolderLogs(log)
	require.Equal(t, []holderLog{
		{pid: "11072", lines: []string{
			"2026-12-06 04:45:30.100 UTC [11072] LOG:  starting apply for subscription sub_n1_n2",
			"2026-12-06 04:45:48.000 UTC [11072] LOG:  still connecting",
		}},
		{pid: "999"},
	}, got)
	require.Empty(t, originHolderLogs("2026-12-06 LOG:  nothing held\n"))
}
