package actors_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithPostgresNoLeaks(m, &pg))
}

// env is one test's database (testenv.DB) with the Processor helpers of
// these tests.
type env struct{ *testenv.DB }

func newEnv(t *testing.T) *env {
	t.Helper()
	d := pg.NewDB(t)
	return envOn(t, d.URL, d.Pool)
}

// envOn wraps a database the test made itself (url, and pool on it).
func envOn(t *testing.T, url string, pool *pgxpool.Pool) *env {
	return &env{DB: &testenv.DB{T: t, URL: url, Pool: pool}}
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// startProcessor starts a Processor on e's database, stopped when t ends.
func (e *env) startProcessor(mod func(*actors.Config)) *actors.Processor {
	e.T.Helper()
	cfg := actors.Config{
		DatabaseURL: e.URL,
		Concurrency: 16,
		// Small batches, as many tests expect of a few dozen events.
		SQLBatchConcurrency: 16,
		PollInterval:        100 * time.Millisecond,
		HeartbeatInterval:   200 * time.Millisecond,
		DeadAfter:           time.Second,
		ShutdownTimeout:     5 * time.Second,
		IdleTimeout:         time.Second,
		Logger:              testLogger(e.T),
	}
	if mod != nil {
		mod(&cfg)
	}
	p, err := actors.New(cfg)
	require.NoError(e.T, err)
	require.NoError(e.T, p.Start(context.Background()))
	e.T.Cleanup(func() { _ = p.Stop(context.Background()) })
	return p
}
