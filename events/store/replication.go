package store

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Replication is what this database's node replicates of pgrelay's tables
// and the notifier's, as its replication extension (pglogical or Spock)
// records it.
type Replication struct {
	// Node is pgrelay's node id of this database (pgrelay._this_node()).
	Node int
	// Extension is "spock" or "pglogical"; empty when neither is installed.
	Extension string
	// Missing lists the tables (schema.table) of schemas pgrelay and
	// pgrelay_notifier, but the node-local ones (ReplicationOf's nodeLocal),
	// that are in no replication set this node's subscriptions use.
	Missing []string
	// NodeLocal lists the node-local tables (ReplicationOf's nodeLocal)
	// that are in a replication set of this node, each as "table (set)":
	// replicated, every node's record of its migrations, or its lock rows,
	// would be overwritten by the others'.
	NodeLocal []LocalInSet
}

// LocalInSet is a node-local table found in a replication set.
type LocalInSet struct{ Table, Set string }

// String is l as "table (set s)".
func (l LocalInSet) String() string { return l.Table + " (set " + l.Set + ")" }

// ReplicationOf reads which of pgrelay's and the notifier's tables are
// replicated; nodeLocal names the tables of schema pgrelay each node keeps
// for itself (migrations.NodeLocalTables). A table counts as replicated
// when it is in a replication set of this node that one of this node's
// subscriptions names: the other nodes subscribe to this one by the same
// set names in the set-ups docs/multi-master.md describes. With no
// extension every table is missing.
func ReplicationOf(ctx context.Context, q Querier, nodeLocal []string) (Replication, error) {
	var r Replication
	var schema string
	err := q.QueryRow(ctx, `SELECT pgrelay._this_node(), COALESCE(e.extname::pg_catalog.text, ''),
		COALESCE(e.extnamespace::pg_catalog.regnamespace::pg_catalog.text, '')
		FROM (SELECT 1) one LEFT JOIN LATERAL (
		  SELECT x.extname, x.extnamespace FROM pg_catalog.pg_extension x
		   WHERE x.extname OPERATOR(pg_catalog.=) ANY ('{spock,pglogical}'::pg_catalog.name[])
		   ORDER BY x.extname OPERATOR(pg_catalog.=) 'spock'::pg_catalog.name DESC LIMIT 1) e ON true`).
		Scan(&r.Node, &r.Extension, &schema)
	if err != nil {
		return r, fmt.Errorf("replication check: find pglogical or Spock: %w", err)
	}
	ext := pgx.Identifier{schema}.Sanitize()
	replicated := "false"
	if r.Extension != "" {
		replicated = `EXISTS (SELECT FROM ` + ext + `.replication_set_table t
		    JOIN ` + ext + `.replication_set s ON s.set_id OPERATOR(pg_catalog.=) t.set_id
		   WHERE t.set_reloid OPERATOR(pg_catalog.=) c.oid
		     AND s.set_nodeid OPERATOR(pg_catalog.=) ANY (SELECT l.node_id FROM ` + ext + `.local_node l)
		     AND s.set_name::pg_catalog.text OPERATOR(pg_catalog.=) ANY (
		       SELECT pg_catalog.unnest(sub.sub_replication_sets) FROM ` + ext + `.subscription sub))`
	}
	rows, err := q.Query(ctx, `SELECT pg_catalog.format('%I.%I', n.nspname, c.relname)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) ANY ('{pgrelay,pgrelay_notifier}'::pg_catalog.name[])
		  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog."char"[])
		  AND NOT (n.nspname OPERATOR(pg_catalog.=) 'pgrelay'::pg_catalog.name
		           AND c.relname::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]))
		  AND NOT `+replicated+`
		ORDER BY 1`, nodeLocal)
	if err != nil {
		return r, fmt.Errorf("replication check (%s): %w", r.Extension, err)
	}
	if r.Missing, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
		return r, fmt.Errorf("replication check (%s): %w", r.Extension, err)
	}
	if r.Extension == "" {
		return r, nil
	}
	// The node-local tables in any set of this node, subscribed or not (a
	// set another node subscribes to by another name replicates too).
	rows, err = q.Query(ctx, `SELECT pg_catalog.format('pgrelay.%I', c.relname), s.set_name::pg_catalog.text
		FROM `+ext+`.replication_set_table t
		JOIN `+ext+`.replication_set s ON s.set_id OPERATOR(pg_catalog.=) t.set_id
		JOIN pg_catalog.pg_class c ON c.oid OPERATOR(pg_catalog.=) t.set_reloid
		WHERE s.set_nodeid OPERATOR(pg_catalog.=) ANY (SELECT l.node_id FROM `+ext+`.local_node l)
		  AND c.relnamespace OPERATOR(pg_catalog.=) 'pgrelay'::pg_catalog.regnamespace
		  AND c.relname::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[])
		ORDER BY 1, 2`, nodeLocal)
	if err != nil {
		return r, fmt.Errorf("replication check (%s): node-local tables: %w", r.Extension, err)
	}
	if r.NodeLocal, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (LocalInSet, error) {
		var l LocalInSet
		err := row.Scan(&l.Table, &l.Set)
		return l, err
	}); err != nil {
		return r, fmt.Errorf("replication check (%s): node-local tables: %w", r.Extension, err)
	}
	return r, nil
}
