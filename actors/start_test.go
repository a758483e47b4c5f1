package actors_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// A Start that fails once the instance is registered (here: the NATS
// credentials file is missing) undoes all it did: the instance is
// unregistered, its pools closed, and Stop has nothing left to do.
func TestActorStartFailureUndoesItself(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p, err := actors.New(actors.Config{DatabaseURL: e.URL, Logger: testLogger(t),
		NATS: &actors.NATSConfig{URL: "nats://127.0.0.1:1", CredsFile: filepath.Join(t.TempDir(), "missing.creds")}})
	require.NoError(t, err)
	require.ErrorContains(t, p.Start(context.Background()), "missing.creds")
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.processors`))
	testenv.Eventually(e.T, 10*time.Second, "the Processor's connections to close", func() bool {
		return e.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
		                 AND application_name LIKE 'pgrelay%'`) == 0
	})
	require.NoError(t, p.Stop(context.Background()))
}
