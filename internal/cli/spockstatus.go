package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// spockSub is one subscription of this Spock node, as sub_show_status() and
// lag_tracker report it.
type spockSub struct {
	Name, Status, Provider string
	// Lag is lag_tracker's replication_lag from the provider to this node
	// (nil when Spock has no row for the pair yet).
	Lag      *time.Duration
	LagBytes *int64
}

// spockStatus is what Spock says of this node's replication.
type spockStatus struct {
	Node int
	Subs []spockSub
	// Exceptions counts spock.exception_log's rows; OnPgrelay those on
	// tables of pgrelay and pgrelay_notifier; Latest is the newest row's
	// table and error.
	Exceptions, OnPgrelay int64
	Latest                string
}

// readSpockStatus reads this node's subscriptions, their lag and the apply
// exceptions; ok is false when the database has no Spock node.
func readSpockStatus(ctx context.Context, q querier, node int) (s spockStatus, ok bool, err error) {
	s.Node = node
	var schema string
	if err := q.QueryRow(ctx, `SELECT COALESCE((SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_extension x
		  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) x.extnamespace
		 WHERE x.extname OPERATOR(pg_catalog.=) 'spock'::pg_catalog.name), ''::pg_catalog.text)`).Scan(&schema); err != nil {
		return s, false, fmt.Errorf("spock status: %w", err)
	}
	if schema == "" {
		return s, false, nil
	}
	ext := pgx.Identifier{schema}.Sanitize()
	var local *string
	if err := q.QueryRow(ctx, `SELECT (SELECT n.node_name::pg_catalog.text FROM `+ext+`.local_node l
		  JOIN `+ext+`.node n ON n.node_id OPERATOR(pg_catalog.=) l.node_id)`).Scan(&local); err != nil {
		return s, false, fmt.Errorf("spock status: local node: %w", err)
	}
	if local == nil {
		return s, false, nil
	}
	rows, err := q.Query(ctx, `SELECT s.subscription_name, s.status, COALESCE(s.provider_node, ''),
		  (SELECT pg_catalog.max(t.replication_lag) FROM `+ext+`.lag_tracker t
		    WHERE t.origin_name::pg_catalog.text OPERATOR(pg_catalog.=) s.provider_node
		      AND t.receiver_name::pg_catalog.text OPERATOR(pg_catalog.=) $1::pg_catalog.text),
		  (SELECT pg_catalog.max(t.replication_lag_bytes)::pg_catalog.int8 FROM `+ext+`.lag_tracker t
		    WHERE t.origin_name::pg_catalog.text OPERATOR(pg_catalog.=) s.provider_node
		      AND t.receiver_name::pg_catalog.text OPERATOR(pg_catalog.=) $1::pg_catalog.text)
		FROM `+ext+`.sub_show_status() s ORDER BY 1`, *local)
	if err != nil {
		return s, false, fmt.Errorf("spock status: subscriptions: %w", err)
	}
	s.Subs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (spockSub, error) {
		var sub spockSub
		err := r.Scan(&sub.Name, &sub.Status, &sub.Provider, &sub.Lag, &sub.LagBytes)
		return sub, err
	})
	if err != nil {
		return s, false, fmt.Errorf("spock status: subscriptions: %w", err)
	}
	if err := q.QueryRow(ctx, `SELECT pg_catalog.count(*),
		  pg_catalog.count(*) FILTER (WHERE e.table_schema OPERATOR(pg_catalog.=) ANY ('{pgrelay,pgrelay_notifier}'::pg_catalog.text[])),
		  COALESCE((SELECT pg_catalog.format('%s.%s: %s', l.table_schema, l.table_name, l.error_message)
		     FROM `+ext+`.exception_log l ORDER BY l.retry_errored_at DESC LIMIT 1), '')
		FROM `+ext+`.exception_log e`).Scan(&s.Exceptions, &s.OnPgrelay, &s.Latest); err != nil {
		return s, false, fmt.Errorf("spock status: exception_log: %w", err)
	}
	return s, true, nil
}

// notReplicating lists the subscriptions whose status is not replicating.
func (s spockStatus) notReplicating() []string {
	var out []string
	for _, sub := range s.Subs {
		if sub.Status != "replicating" {
			out = append(out, sub.Name+" ("+sub.Status+")")
		}
	}
	return out
}

// lines is what `pgrelay nodes` prints of it: the subscriptions with their
// lag, and the apply exceptions.
func (s spockStatus) lines() string {
	var subs []string
	for _, sub := range s.Subs {
		l := fmt.Sprintf("%s from %s %s", sub.Name, sub.Provider, sub.Status)
		if sub.Lag != nil {
			l += fmt.Sprintf(", lag %s", sub.Lag.Round(time.Millisecond))
			if sub.LagBytes != nil {
				l += fmt.Sprintf(" (%d bytes)", *sub.LagBytes)
			}
		}
		subs = append(subs, l)
	}
	if len(subs) == 0 {
		subs = []string{"none"}
	}
	out := fmt.Sprintf("subscriptions (node %d, spock): %s\n", s.Node, strings.Join(subs, "; "))
	if s.Exceptions == 0 {
		return out + fmt.Sprintf("apply exceptions (node %d, spock): none in spock.exception_log", s.Node)
	}
	return out + fmt.Sprintf("apply exceptions (node %d, spock): %d in spock.exception_log, %d on pgrelay's tables; the latest: %s "+
		"(each is a transaction from another node this node skipped: docs/multi-master.md)", s.Node, s.Exceptions, s.OnPgrelay, s.Latest)
}
