package processor

import (
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/require"
)

// The release recorded is the pgrelay module's version the program requires
// (or its replacement's), "dev" when the build does not say.
func TestReleaseOf(t *testing.T) {
	t.Parallel()
	app := func(deps ...*debug.Module) *debug.BuildInfo {
		return &debug.BuildInfo{Main: debug.Module{Path: "example.com/shop"}, Deps: deps}
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		ok   bool
		want string
	}{
		{"required", app(&debug.Module{Path: "github.com/jackc/pgx/v5", Version: "v5.7.1"},
			&debug.Module{Path: modulePath, Version: "v0.2.0"}), true, "v0.2.0"},
		{"replaced by a version", app(&debug.Module{Path: modulePath, Version: "v0.2.0",
			Replace: &debug.Module{Path: "example.com/fork", Version: "v0.2.1"}}), true, "v0.2.1"},
		{"replaced by a directory", app(&debug.Module{Path: modulePath, Version: "v0.2.0",
			Replace: &debug.Module{Path: "../pgrelay"}}), true, "dev"},
		{"pgrelay's own build", &debug.BuildInfo{Main: debug.Module{Path: modulePath, Version: "(devel)"}}, true, "dev"},
		{"no build information", nil, false, "dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, releaseOf(tc.bi, tc.ok))
		})
	}
}
