package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// SpockSub is one subscription of this Spock node, as sub_show_status() and
// lag_tracker report it.
type SpockSub struct {
	Name, Status, Provider string
	// Lag is lag_tracker's replication_lag from the provider to this node
	// (nil when Spock has no row for the pair yet).
	Lag      *time.Duration
	LagBytes *int64
}

// SpockReplication is what Spock says of this node's replication.
type SpockReplication struct {
	Subs []SpockSub
	// Exceptions counts spock.exception_log's rows; OnPgrelay those on
	// tables of pgrelay and pgrelay_notifier; Latest is the newest row's
	// table and error.
	Exceptions, OnPgrelay int64
	Latest                string
}

// SpockSchema returns the schema of the spock extension, "" when the
// database has none.
func SpockSchema(ctx context.Context, q Querier) (string, error) {
	var schema string
	if err := q.QueryRow(ctx, `SELECT COALESCE((SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_extension x
		  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) x.extnamespace
		 WHERE x.extname OPERATOR(pg_catalog.=) 'spock'::pg_catalog.name), ''::pg_catalog.text)`).Scan(&schema); err != nil {
		return "", fmt.Errorf("spock status: %w", err)
	}
	return schema, nil
}

// SpockStatus reads this node's Spock subscriptions, their lag and the
// apply exceptions; ok is false when the database has no Spock node.
func SpockStatus(ctx context.Context, q Querier) (s SpockReplication, ok bool, err error) {
	schema, err := SpockSchema(ctx, q)
	if err != nil || schema == "" {
		return s, false, err
	}
	return SpockStatusIn(ctx, q, schema)
}

// SpockStatusIn is SpockStatus with the extension's schema known
// (SpockSchema, not ""); ok is false when the database is no Spock node.
func SpockStatusIn(ctx context.Context, q Querier, schema string) (s SpockReplication, ok bool, err error) {
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
	s.Subs, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (SpockSub, error) {
		var sub SpockSub
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
