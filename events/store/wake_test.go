package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// An arming supersedes the wait of the one before, also when it armed
// nothing (another Processor of the node, or an arming while the
// notification was on its way, re-armed the slot first): its snapshot still
// holds every transaction of the earlier one that is in progress, such as a
// producer that found its slot taken and sent no notification.
func TestArmWakesSnapshotHoldsOpenProducersWhenNothingNeededArming(t *testing.T) {
	ctx := context.Background()
	pool := pg.Pool(t)
	s := New(pool, nil, nil)
	_, err := pool.Exec(ctx, `SELECT pgrelay.register('c', 'SELECT 1')`)
	require.NoError(t, err)
	_, err = s.ArmWakes(ctx)
	require.NoError(t, err)

	// A producer takes the slot, and another one finds it taken (locked)
	// and sends nothing; the first commits, the second stays open.
	taker, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = taker.Rollback(ctx) }()
	_, err = taker.Exec(ctx, `SELECT pgrelay.notify('c', 'first')`)
	require.NoError(t, err)
	skipped, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = skipped.Rollback(ctx) }()
	_, err = skipped.Exec(ctx, `SELECT pgrelay.notify('c', 'second')`)
	require.NoError(t, err)
	require.NoError(t, taker.Commit(ctx))

	rearmed, err := s.ArmWakes(ctx)
	require.NoError(t, err)
	ended, err := s.WakeXidsEnded(ctx, rearmed)
	require.NoError(t, err)
	require.False(t, ended, "the producer that found its slot taken is open")

	// The notification's own arming comes second and finds nothing to arm.
	again, err := s.ArmWakes(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, again, "a snapshot although nothing needed arming")
	ended, err = s.WakeXidsEnded(ctx, again)
	require.NoError(t, err)
	require.False(t, ended, "the open producer is in the later snapshot too")

	require.NoError(t, skipped.Commit(ctx))
	ended, err = s.WakeXidsEnded(ctx, again)
	require.NoError(t, err)
	require.True(t, ended)
}
