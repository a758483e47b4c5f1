package actors_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/handlers"
)

// Validate checks a Config as it stands and names the refused setting as
// its flag; New fills in the defaults of zero settings first.
func TestActorConfigValidate(t *testing.T) {
	t.Parallel()
	cfg := actors.Config{DatabaseURL: "postgres://x"}
	var ce *actors.ConfigError
	require.True(t, errors.As(cfg.Validate(), &ce))
	require.Equal(t, "concurrency", ce.Setting)
	_, err := actors.New(cfg)
	require.NoError(t, err)

	cfg.Concurrency = -1
	_, err = actors.New(cfg)
	require.True(t, errors.As(err, &ce))
	require.Equal(t, "concurrency", ce.Setting)
	require.EqualError(t, err, "pgrelay: concurrency must be at least 1")

	cfg.Concurrency, cfg.PollInterval = 0, -1
	_, err = actors.New(cfg)
	require.EqualError(t, err, "pgrelay: poll-interval must be positive")

	cfg.PollInterval, cfg.DeadLetterRetention = 0, -time.Hour
	_, err = actors.New(cfg)
	require.EqualError(t, err, "pgrelay: dead-letter-retention must be positive")
	cfg.DeadLetterRetention = 0
	// Go handlers: a name the channels can hold, and one function each.
	nop := func(context.Context, pgx.Tx, handlers.Event) error { return nil }
	cfg.PollInterval = 0
	cfg.GoHandlers = map[string]handlers.GoHandler{"charge card": {Fn: nop}}
	_, err = actors.New(cfg)
	require.EqualError(t, err, `pgrelay: go handler "charge card": not a valid name (1 to 100 letters, digits, "_", "." or "-", starting with a letter or "_")`)
	cfg.GoHandlers = map[string]handlers.GoHandler{"charge": {}}
	_, err = actors.New(cfg)
	require.EqualError(t, err, `pgrelay: go handler "charge": needs exactly one of a function and a batch function`)
	cfg.GoHandlers = map[string]handlers.GoHandler{"charge": {Fn: nop}}
	_, err = actors.New(cfg)
	require.NoError(t, err)
}
