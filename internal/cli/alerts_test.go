package cli_test

import (
	"os"
	"os/exec"
	"regexp"
	"testing"

	"github.com/stretchr/testify/require"
)

// docs/alerts.yml is a valid Prometheus rule file, and each rule fires and
// resolves on the series of testdata/alerts_test.yml (`promtool test
// rules`). promtool comes with Debian's prometheus package
// (scripts/ensure-promtool.sh, run by `make test`); without it the test is
// skipped.
func TestAlertRules(t *testing.T) {
	t.Parallel()
	// Every rule has its test: one that fires it and one where it is
	// resolved (no alert expected).
	rules, err := os.ReadFile("../../docs/alerts.yml")
	require.NoError(t, err)
	tests, err := os.ReadFile("testdata/alerts_test.yml")
	require.NoError(t, err)
	names := regexp.MustCompile(`(?m)^\s*- alert: (\S+)$`).FindAllSubmatch(rules, -1)
	require.Len(t, names, 11)
	for _, n := range names {
		name := regexp.QuoteMeta(string(n[1]))
		require.Regexp(t, `alertname: `+name+`\n\s+exp_alerts:\n\s+- exp_labels`, string(tests), "a test that fires %s", n[1])
		require.Regexp(t, `alertname: `+name+`\n\s+exp_alerts: \[\]`, string(tests), "a test where %s is resolved", n[1])
	}
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus, scripts/ensure-promtool.sh): docs/alerts.yml not tested")
	}
	out, err := exec.Command(promtool, "check", "rules", "../../docs/alerts.yml").CombinedOutput()
	require.NoError(t, err, "promtool check rules docs/alerts.yml:\n%s", out)
	require.Contains(t, string(out), "SUCCESS: 11 rules found")
	out, err = exec.Command(promtool, "test", "rules", "testdata/alerts_test.yml").CombinedOutput()
	require.NoError(t, err, "promtool test rules testdata/alerts_test.yml:\n%s", out)
	require.Contains(t, string(out), "SUCCESS")
}
