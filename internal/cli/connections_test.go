package cli_test

import (
	"context"
	"regexp"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// run warns at start when its connections may not fit in what the server
// has left, and not when they do: on a server of its own with
// max_connections 20, the default 24 do not fit, 10 do.
func TestRunWarnsWhenConnectionsMayNotFit(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	small, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{Settings: map[string]string{"max_connections": "20"}})
	require.NoError(t, err)
	t.Cleanup(func() { _ = small.Stop() })
	c, err := pgx.Connect(ctx, small.URL("postgres"))
	require.NoError(t, err)
	_, err = migrations.Up(ctx, c)
	require.NoError(t, err)
	require.NoError(t, c.Close(ctx))
	url := small.URL("postgres")

	warn := regexp.MustCompile(`connections: this Processor may open 24 connections but the server has \d+ free \(max_connections 20, 3 reserved for superusers, \d+ open\): lower --max-connections or raise max_connections`)
	for _, tc := range []struct {
		args []string
		warn bool
	}{
		{nil, true},
		{[]string{"--max-connections", "10"}, false},
	} {
		p := startCLI(t, nil, append([]string{"run", "--database-url", url, "--log-level", "info"}, tc.args...)...)
		testenv.Eventually(t, 60*time.Second, "the Processor to start", func() bool {
			return regexp.MustCompile(`msg="processor started"`).MatchString(p.stderr.String()) || p.exited()
		})
		p.signal(syscall.SIGTERM)
		require.Equal(t, 0, p.wait(60*time.Second))
		if tc.warn {
			assert.Regexp(t, warn, p.stderr.String())
		} else {
			assert.NotContains(t, p.stderr.String(), "connections: this Processor may open")
		}
	}
	code, _, errOut := runCLI(t, nil, "run", "--database-url", url, "--max-connections", "9")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, "--max-connections must be at least 10")
}
