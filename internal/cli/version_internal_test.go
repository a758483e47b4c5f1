package cli

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestVersionLine(t *testing.T) {
	t.Parallel()
	stamp := func(mainVersion string, kv ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/pgrelay/pgrelay", Version: mainVersion}}
		for i := 0; i < len(kv); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return bi
	}
	rev := "5a9ab90c0ffee0123456789abcdef0123456789a"
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want string
	}{
		{"built in a checkout", stamp("(devel)", "vcs.revision", rev, "vcs.time", "2026-12-01T10:00:00Z", "vcs.modified", "false"),
			"pgrelay v0.2.0 (commit 5a9ab90c0ffe, 2026-12-01T10:00:00Z)"},
		{"uncommitted changes", stamp("(devel)", "vcs.revision", rev, "vcs.modified", "true"),
			"pgrelay v0.2.0 (commit 5a9ab90c0ffe+modified)"},
		{"go install module@version: the source's release, not the module's", stamp("v0.1.0"),
			"pgrelay v0.2.0 (commit unknown: built outside a git checkout)"},
		{"untagged checkout", stamp("v0.0.0-20261201063823-5a9ab90c0ffe+dirty", "vcs.revision", rev, "vcs.modified", "true"),
			"pgrelay v0.2.0 (commit 5a9ab90c0ffe+modified)"},
		{"no build information", nil,
			"pgrelay v0.2.0 (commit unknown: built outside a git checkout)"},
	} {
		assert.Equal(t, tc.want, versionLine("v0.2.0", tc.bi), tc.name)
	}
}

// The hints name a command that works: "pgrelay" only when that name on
// $PATH is this very binary, else the binary's path.
func TestSelfCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "bin", "pgrelay")
	other := filepath.Join(dir, "elsewhere", "pgrelay")
	for _, p := range []string{bin, other} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755))
	}
	found := func(p string) func(string) (string, error) {
		return func(string) (string, error) {
			if p == "" {
				return "", exec.ErrNotFound
			}
			return p, nil
		}
	}
	exe := func() (string, error) { return bin, nil }
	wd := func(d string) func() (string, error) { return func() (string, error) { return d, nil } }

	assert.Equal(t, "pgrelay", selfCommand(found(bin), exe, wd(dir)), "installed: the name on $PATH is this binary")
	assert.Equal(t, "./bin/pgrelay", selfCommand(found(""), exe, wd(dir)), "not installed, below the working directory")
	assert.Equal(t, "./bin/pgrelay", selfCommand(found(other), exe, wd(dir)), "another pgrelay on $PATH is not this one")
	assert.Equal(t, bin, selfCommand(found(""), exe, wd(t.TempDir())), "elsewhere: the absolute path")
	assert.Equal(t, "pgrelay", selfCommand(found(""), func() (string, error) { return "", errors.New("no /proc") }, wd(dir)))
}
