package store

import (
	"context"
	"fmt"
)

// ArmWakes asks this node's producers for wake-ups again
// (pgrelay._arm_wakes): the next producer on each slot a notification took
// sends one. When it armed any slot it returns the snapshot of the
// transactions in progress once the arming committed (pg_current_snapshot
// as text), for WakeXidsEnded; "" when nothing needed arming. Both run in
// autocommit mode on the hot pool, one after the other: the snapshot must
// come after the commit.
func (s *Store) ArmWakes(ctx context.Context) (snapshot string, err error) {
	var armed int32
	if err := s.hot.QueryRow(ctx, "SELECT pgrelay._arm_wakes()").Scan(&armed); err != nil {
		return "", fmt.Errorf("arm wake-ups: %w", err)
	}
	if armed == 0 {
		return "", nil
	}
	if err := s.hot.QueryRow(ctx, "SELECT pg_catalog.pg_current_snapshot()::pg_catalog.text").Scan(&snapshot); err != nil {
		return "", fmt.Errorf("arm wake-ups: read the transactions in progress: %w", err)
	}
	return snapshot, nil
}

// WakeXidsEnded reports whether every transaction in progress at snapshot
// (from ArmWakes) has ended: a producer that enqueued while its slot was
// taken, and so sent no wake-up, was one of them.
func (s *Store) WakeXidsEnded(ctx context.Context, snapshot string) (bool, error) {
	var ended bool
	if err := s.hot.QueryRow(ctx, "SELECT pgrelay._wake_xids_ended($1::pg_catalog.pg_snapshot)", snapshot).Scan(&ended); err != nil {
		return false, fmt.Errorf("wake-ups: check the transactions of snapshot %s: %w", snapshot, err)
	}
	return ended, nil
}
