package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/migrations"
)

// replication is what this database's node replicates of pgrelay's tables
// and the notifier's, as its replication extension (pglogical or Spock)
// records it.
type replication struct {
	// Node is pgrelay's node id of this database (pgrelay._this_node()).
	Node int
	// Extension is "spock" or "pglogical"; empty when neither is installed.
	Extension string
	// Missing lists the tables (schema.table) of schemas pgrelay and
	// pgrelay_notifier, but the node-local ones (migrations.NodeLocalTables),
	// that are in no replication set this node's subscriptions use.
	Missing []string
	// NodeLocal lists the node-local tables (migrations.NodeLocalTables)
	// that are in a replication set of this node, each as "table (set)":
	// replicated, every node's record of its migrations, or its lock rows,
	// would be overwritten by the others'.
	NodeLocal []localInSet
}

// localInSet is a node-local table found in a replication set.
type localInSet struct{ Table, Set string }

func (l localInSet) String() string { return l.Table + " (set " + l.Set + ")" }

// nodeLocalList is r.NodeLocal as "t (set s), ...".
func (r replication) nodeLocalList() string {
	out := make([]string, len(r.NodeLocal))
	for i, l := range r.NodeLocal {
		out[i] = l.String()
	}
	return strings.Join(out, ", ")
}

// checkReplication reads which of pgrelay's and the notifier's tables are
// replicated. A table counts as replicated when it is in a replication set
// of this node that one of this node's subscriptions names: the other nodes
// subscribe to this one by the same set names in the set-ups
// docs/multi-master.md describes. With no extension every table is missing.
func checkReplication(ctx context.Context, q store.Querier) (replication, error) {
	var r replication
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
		ORDER BY 1`, migrations.NodeLocalTables())
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
		ORDER BY 1, 2`, migrations.NodeLocalTables())
	if err != nil {
		return r, fmt.Errorf("replication check (%s): node-local tables: %w", r.Extension, err)
	}
	if r.NodeLocal, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (localInSet, error) {
		var l localInSet
		err := row.Scan(&l.Table, &l.Set)
		return l, err
	}); err != nil {
		return r, fmt.Errorf("replication check (%s): node-local tables: %w", r.Extension, err)
	}
	return r, nil
}

// notifierMissing reports whether a table of the notifier is missing.
func (r replication) notifierMissing() bool {
	for _, t := range r.Missing {
		if strings.HasPrefix(t, "pgrelay_notifier.") {
			return true
		}
	}
	return false
}

// summary is what this node replicates: one line, two when node-local
// tables are replicated too.
func (r replication) summary() string {
	var line string
	switch {
	case r.Extension == "":
		return fmt.Sprintf("replication (node %d): no pglogical or Spock in this database: "+
			"nothing of pgrelay's is replicated (fine for one primary; multi-node and leader need it)", r.Node)
	case len(r.Missing) == 0:
		line = fmt.Sprintf("replication (node %d, %s): every table of pgrelay and pgrelay_notifier is in a subscribed replication set",
			r.Node, r.Extension)
	default:
		line = fmt.Sprintf("replication (node %d, %s): NOT REPLICATED: %s (add them to a replication set on every node: docs/multi-master.md)",
			r.Node, r.Extension, strings.Join(r.Missing, ", "))
	}
	if len(r.NodeLocal) > 0 {
		line += fmt.Sprintf("\nreplication (node %d, %s): WRONGLY REPLICATED: %s (each node keeps its own: %s)",
			r.Node, r.Extension, r.nodeLocalList(), r.nodeLocalFix())
	}
	return line
}

// nodeLocalFix says how to take r.NodeLocal out of replication.
func (r replication) nodeLocalFix() string {
	if r.Extension == "spock" {
		return "pgrelay migrate takes them out, or spock.repset_remove_table(set, table)"
	}
	return "pglogical.replication_set_remove_table(set, table)"
}
