package cli_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/version"
)

// Every build names the release the source holds: a plain `go build` (no
// -ldflags, as `go install` builds too) and `make build`, whatever tags the
// clone has. `make build`'s binary is TestMakeInstall's (make install builds
// it): one link of the binary less.
func TestBuildsPrintTheSourcesRelease(t *testing.T) {
	t.Parallel()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	require.NoError(t, err)
	want := "pgrelay " + version.Release + " (commit "
	printed := func(bin string) string {
		out, err := exec.Command(bin, "version").CombinedOutput()
		require.NoError(t, err, string(out))
		return string(out)
	}

	bin := filepath.Join(t.TempDir(), "pgrelay")
	build := exec.Command("go", "build", "-o", bin, "./cmd/pgrelay")
	build.Dir = root
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	require.True(t, strings.HasPrefix(printed(bin), want), "go build: %q, want %q…", printed(bin), want)
}
