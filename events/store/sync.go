package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SyncAsk asks every other node of the cluster to answer
// (pgrelay._sync_ask) and returns the term to wait for with SyncWaiting.
func (s *Store) SyncAsk(ctx context.Context) (int64, error) {
	var term int64
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._sync_ask()").Scan(&term); err != nil {
		return 0, fmt.Errorf("ask the other nodes to answer: %w", err)
	}
	return term, nil
}

// SyncAnswer answers the asks of other nodes this node has not answered yet
// (pgrelay._sync_answer) and returns how many it answered.
func (s *Store) SyncAnswer(ctx context.Context) (int, error) {
	var n int32
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._sync_answer()").Scan(&n); err != nil {
		return 0, fmt.Errorf("answer the other nodes' asks: %w", err)
	}
	return int(n), nil
}

// ResolveKeys decides this node's events held for their unique key on a
// cluster (pgrelay._resolve_keys): each is released, or ended deduplicated
// when another node's event of the same key has a lower id, once the other
// nodes' answers prove their rows below it are here; an event held for
// deadAfter without that proof is decided with the rows at hand. It asks the
// other nodes again while some wait. Returns how many it decided.
func (s *Store) ResolveKeys(ctx context.Context, deadAfter time.Duration) (int, error) {
	var n int32
	if err := s.bg.QueryRow(ctx, "SELECT pgrelay._resolve_keys($1::pg_catalog.interval)", deadAfter).Scan(&n); err != nil {
		return 0, fmt.Errorf("decide the events held for their unique keys: %w", err)
	}
	return int(n), nil
}

// SyncPeer is one row of pgrelay._sync_peers: a node this node must hear
// from, whether it answered the ask, and whether it looks alive here.
type SyncPeer struct {
	Node            int32
	Answered, Alive bool
}

// SyncPeers returns the peers this node must hear from after its ask of term
// (pgrelay._sync_peers); none when there is no peer to hear from (then
// nothing is proven).
func (s *Store) SyncPeers(ctx context.Context, term int64, deadAfter time.Duration) ([]SyncPeer, error) {
	rows, err := s.bg.Query(ctx, "SELECT peer, answered, alive FROM pgrelay._sync_peers($1::pg_catalog.int8, $2::pg_catalog.interval)",
		term, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("read the answers to ask %d: %w", term, err)
	}
	peers, err := pgx.CollectRows(rows, pgx.RowToStructByPos[SyncPeer])
	if err != nil {
		return nil, fmt.Errorf("read the answers to ask %d: %w", term, err)
	}
	return peers, nil
}
