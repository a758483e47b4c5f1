package store

import (
	"context"
	"fmt"
)

// ArmWakes asks this node's producers for wake-ups again
// (pgrelay._arm_wakes): the next producer on each slot a notification took
// sends one. It returns the snapshot of the transactions in progress once
// the arming committed (pg_current_snapshot as text), for WakeXidsEnded,
// even when nothing needed arming: an arming supersedes the wait of the one
// before (see actors' arm), and a transaction that found its slot taken
// before some other arming (another Processor's, or this one's while the
// notification was on its way) is still in progress in this snapshot, or
// has ended. Both run in autocommit mode on the hot pool, one after the
// other: the snapshot must come after the commit.
func (s *Store) ArmWakes(ctx context.Context) (snapshot string, err error) {
	if _, err := s.hot.Exec(ctx, "SELECT pgrelay._arm_wakes()"); err != nil {
		return "", fmt.Errorf("arm wake-ups: %w", err)
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
