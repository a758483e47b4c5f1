package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// ArmWakes asks this node's producers for wake-ups again
// (pgrelay._arm_wakes): the next producer on each slot a notification took
// sends one. It returns the snapshot of the transactions in progress once
// the arming committed (pg_current_snapshot as text), for WakeXidsEnded,
// even when nothing needed arming: an arming supersedes the wait of the one
// before (see actors' arm), and a transaction that found its slot taken
// before some other arming (another Processor's, or this one's while the
// notification was on its way) is still in progress in this snapshot, or
// has ended. The snapshot must come after the arming's commit: the two are
// two transactions, sent in one round trip (a pipeline with a Sync after
// each).
func (s *Store) ArmWakes(ctx context.Context) (snapshot string, err error) {
	conn, err := s.hot.Acquire(ctx)
	if err != nil {
		return "", fmt.Errorf("arm wake-ups: %w", err)
	}
	defer conn.Release()
	p := conn.Conn().PgConn().StartPipeline(ctx)
	p.SendQueryParams("SELECT pgrelay._arm_wakes()", nil, nil, nil, nil)
	p.SendPipelineSync()
	p.SendQueryParams("SELECT pg_catalog.pg_current_snapshot()::pg_catalog.text", nil, nil, nil, nil)
	p.SendPipelineSync()
	snapshot, err = armResults(p)
	if cerr := p.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return "", fmt.Errorf("arm wake-ups: %w", err)
	}
	return snapshot, nil
}

// armResults reads ArmWakes' pipeline: the arming, then the snapshot.
func armResults(p *pgconn.Pipeline) (snapshot string, err error) {
	if err := p.Flush(); err != nil {
		return "", err
	}
	for syncs := 0; syncs < 2; {
		r, err := p.GetResults()
		if err != nil {
			return "", err
		}
		switch r := r.(type) {
		case nil:
			return "", errors.New("the pipeline ended before its last sync")
		case *pgconn.ResultReader:
			res := r.Read()
			if res.Err != nil {
				return "", res.Err
			}
			if syncs == 1 && len(res.Rows) == 1 {
				snapshot = string(res.Rows[0][0])
			}
		case *pgconn.PipelineSync:
			syncs++
		}
	}
	if snapshot == "" {
		return "", errors.New("no snapshot read")
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
