package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Rejoining reports whether this node comes back: its row in pgrelay.nodes
// shows it dead (no heartbeat for deadAfter), adopted since its last
// heartbeat, or decommissioned. False when the node has no row yet.
func (s *Store) Rejoining(ctx context.Context, deadAfter time.Duration) (bool, error) {
	var dead bool
	err := s.bg.QueryRow(ctx, `SELECT COALESCE((
		SELECT n.last_seen OPERATOR(pg_catalog.<) (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval)
		       OR n.adopted_at OPERATOR(pg_catalog.>=) n.last_seen
		       OR n.decommissioned_at IS NOT NULL
		  FROM pgrelay.nodes n WHERE n.node_id OPERATOR(pg_catalog.=) pgrelay._this_node()), false)`, deadAfter).Scan(&dead)
	if err != nil {
		return false, fmt.Errorf("read this node's heartbeat: %w", err)
	}
	return dead, nil
}

// Listen makes c's session LISTEN on "pgrelay", the notification channel
// notify() wakes the Processors on.
func Listen(ctx context.Context, c Querier) error {
	if _, err := c.Exec(ctx, "LISTEN pgrelay"); err != nil {
		return fmt.Errorf("listen on pgrelay: %w", err)
	}
	return nil
}

// NodeOverview is one row of pgrelay.nodes_overview().
type NodeOverview struct {
	Node              int
	Mode              string
	LastSeen          time.Time
	Alive, Leader     bool
	Processors        int64
	Pending, Pinned   int64
	Hostname, Version string
	Decommissioned    bool
}

// NodesOverview returns pgrelay.nodes_overview(deadAfter): the cluster's
// nodes, a node silent for deadAfter shown dead.
func NodesOverview(ctx context.Context, q Querier, deadAfter time.Duration) ([]NodeOverview, error) {
	rows, err := q.Query(ctx, `SELECT node_id, mode, last_seen, alive, leader, processors, pending, pinned,
		COALESCE(hostname, ''), COALESCE(version, ''), decommissioned_at IS NOT NULL
		FROM pgrelay.nodes_overview($1::pg_catalog.interval)`, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("nodes overview: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NodeOverview, error) {
		var n NodeOverview
		err := r.Scan(&n.Node, &n.Mode, &n.LastSeen, &n.Alive, &n.Leader, &n.Processors, &n.Pending, &n.Pinned,
			&n.Hostname, &n.Version, &n.Decommissioned)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("nodes overview: %w", err)
	}
	return out, nil
}

// NodeRows counts the queue rows decommissioning node would touch: pinned
// to it (run_in_node), and unrestricted ones it owns.
func NodeRows(ctx context.Context, q Querier, node int) (pinned, owned int64, err error) {
	if err := q.QueryRow(ctx, `SELECT pg_catalog.count(*) FILTER (WHERE run_in_node OPERATOR(pg_catalog.=) $1::pg_catalog.int4),
			pg_catalog.count(*) FILTER (WHERE run_in_node IS NULL AND owner_node OPERATOR(pg_catalog.=) $1::pg_catalog.int4)
			FROM pgrelay.queue
			WHERE run_in_node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 OR owner_node OPERATOR(pg_catalog.=) $1::pg_catalog.int4`,
		node).Scan(&pinned, &owned); err != nil {
		return 0, 0, fmt.Errorf("decommission node %d: count its rows: %w", node, err)
	}
	return pinned, owned, nil
}

// Decommission runs pgrelay.decommission(node, deadAfter) and returns the
// pinned rows it discarded.
func Decommission(ctx context.Context, q Querier, node int, deadAfter time.Duration) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, "SELECT pgrelay.decommission($1::pg_catalog.int4, $2::pg_catalog.interval)", node, deadAfter).Scan(&n); err != nil {
		return 0, fmt.Errorf("decommission node %d: %w", node, err)
	}
	return n, nil
}

// RecordNodeID records the node id of q's session (its pg_relay.node_id) as
// the one producers stamp, until a Processor records its own
// (pgrelay._record_node()).
func RecordNodeID(ctx context.Context, q Querier) error {
	if _, err := q.Exec(ctx, "SELECT pgrelay._record_node()"); err != nil {
		return fmt.Errorf("record this node's id: %w", err)
	}
	return nil
}

// ProcessorsAlive counts, for every node that is not decommissioned, its
// Processors whose heartbeat (pgrelay.processors.last_seen) is younger than
// deadAfter: 0 for a node none of whose Processors runs.
func ProcessorsAlive(ctx context.Context, q Querier, deadAfter time.Duration) (map[int]int64, error) {
	rows, err := q.Query(ctx, `SELECT n.node_id,
		  (SELECT pg_catalog.count(*) FROM pgrelay.processors p
		    WHERE p.node_id OPERATOR(pg_catalog.=) n.node_id
		      AND p.last_seen OPERATOR(pg_catalog.>=) (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval))
		FROM pgrelay.nodes n
		WHERE n.node_id OPERATOR(pg_catalog.>=) 0 AND n.decommissioned_at IS NULL`, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("count the live Processors per node: %w", err)
	}
	out := map[int]int64{}
	var node int
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&node, &n}, func() error { out[node] = n; return nil }); err != nil {
		return nil, fmt.Errorf("count the live Processors per node: %w", err)
	}
	return out, nil
}
