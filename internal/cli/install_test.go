package cli_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/version"
)

// TestMakeInstall runs the README's install commands into a temporary prefix:
// `make install` puts a working pgrelay in $(PREFIX)/bin, built by `make
// build`, that tells its release (the source's) and commit, and `make
// install-service` a systemd unit that runs it and that systemd-analyze
// accepts.
func TestMakeInstall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary with make")
	}
	for _, tool := range []string{"make", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is needed to test `make install`: %v", tool, err)
		}
	}
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	prefix := t.TempDir()
	unitDir := filepath.Join(t.TempDir(), "systemd")
	// BIN keeps this build out of the checkout's bin/.
	cmd := exec.Command("make", "-C", root, "install", "install-service",
		"PREFIX="+prefix, "SYSTEMDDIR="+unitDir, "BIN="+filepath.Join(t.TempDir(), "pgrelay"))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "make install:\n%s", out)

	bin := filepath.Join(prefix, "bin", "pgrelay")
	out, err = exec.Command(bin, "version").CombinedOutput()
	require.NoError(t, err, "%s version: %s", bin, out)
	head, err := exec.Command("git", "-C", root, "rev-parse", "--short=12", "HEAD").Output()
	require.NoError(t, err)
	assert.Regexp(t, regexp.MustCompile(`^pgrelay `+regexp.QuoteMeta(version.Release)+` \(commit `+
		strings.TrimSpace(string(head))+`(\+modified)?, \S+\)\n$`), string(out))

	unit := filepath.Join(unitDir, "pgrelay.service")
	b, err := os.ReadFile(unit)
	require.NoError(t, err)
	assert.Contains(t, string(b), "\nExecStart="+bin+" run\n", "the unit runs the installed binary")
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed: the unit file was not verified")
	}
	out, err = exec.Command(analyze, "verify", "--man=no", unit).CombinedOutput()
	assert.NoError(t, err, "systemd-analyze verify %s:\n%s", unit, out)
	assert.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has no complaint")
}
