package actors_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
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
}
