package cli_test

import (
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/alerts.yml is a valid Prometheus rule file. promtool comes with
// Debian's prometheus package; without it the check is skipped.
func TestAlertRulesCheck(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus): docs/alerts.yml not checked")
	}
	out, err := exec.Command(promtool, "check", "rules", "../../docs/alerts.yml").CombinedOutput()
	require.NoError(t, err, "promtool check rules docs/alerts.yml:\n%s", out)
	require.Contains(t, string(out), "SUCCESS: 8 rules found")
}
