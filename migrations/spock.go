package migrations

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
)

// On a node of a pgEdge Spock cluster every node is migrated on its own, as
// on pglogical, whatever Spock's automatic DDL replication says:
//
//   - The migrating transaction turns spock.enable_ddl_replication and
//     spock.include_ddl_repset off for itself (both are user-settable): with
//     them on (as pgEdge's packages install Spock), node 1's migration would
//     be replayed on node 2, which migrates too — the two collide
//     (pg_namespace_nspname_index) and the replayed DDL fills
//     spock.exception_log — and every new table, schema_migrations
//     included, would join the 'default' replication set.
//   - Once the DDL is applied, in the same transaction, the tables that
//     replicate (every table of schemas pgrelay and pgrelay_notifier but
//     NodeLocalTables) and are in no replication set of this node join the
//     'default' set, and the node-local ones leave every set they are in.
//     A table already in another set is left where it is.
//
// Nothing is done for replication sets on a database without Spock's node
// (spock.node_create not run yet): `pgrelay migrate` run again after it does
// it.

// spockState is what the migrating transaction found of Spock.
type spockState struct {
	// schema is the Spock extension's schema, "" without Spock.
	schema string
	// access tells that this login may read Spock's catalogs.
	access bool
	// node tells that this database is a Spock node (spock.local_node).
	node bool
}

// spockPrepare reads whether Spock is installed and, when it is, keeps this
// transaction's DDL on this node.
func spockPrepare(ctx context.Context, tx pgx.Tx) (spockState, error) {
	var s spockState
	err := tx.QueryRow(ctx, `SELECT COALESCE((SELECT n.nspname::pg_catalog.text FROM pg_catalog.pg_extension x
		  JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) x.extnamespace
		 WHERE x.extname OPERATOR(pg_catalog.=) 'spock'::pg_catalog.name), ''::pg_catalog.text)`).Scan(&s.schema)
	if err != nil {
		return s, fmt.Errorf("migrate: look for Spock: %w", err)
	}
	if s.schema == "" {
		return s, nil
	}
	if _, err := tx.Exec(ctx, `SELECT pg_catalog.set_config('spock.enable_ddl_replication', 'off', true),
		pg_catalog.set_config('spock.include_ddl_repset', 'off', true)`); err != nil {
		return s, fmt.Errorf("migrate: turn Spock's DDL replication off for this transaction: %w", err)
	}
	// A login that may not read Spock's catalogs (its schema is not open
	// to PUBLIC) migrates all the same; the replication sets are then left
	// to a superuser (spockReplicationSets says so).
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.has_schema_privilege($1::pg_catalog.text, 'USAGE'::pg_catalog.text)
		AND pg_catalog.has_table_privilege(pg_catalog.format('%I.local_node', $1::pg_catalog.text), 'SELECT'::pg_catalog.text)`,
		s.schema).Scan(&s.access); err != nil {
		return s, fmt.Errorf("migrate: check access to Spock's catalogs: %w", err)
	}
	if !s.access {
		return s, nil
	}
	if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT FROM `+pgx.Identifier{s.schema}.Sanitize()+`.local_node)`).
		Scan(&s.node); err != nil {
		return s, fmt.Errorf("migrate: read Spock's local node: %w", err)
	}
	return s, nil
}

// spockReplicationSets puts pgrelay's replicated tables of this node in
// Spock's 'default' replication set and takes the node-local ones out of
// every set; it returns what it changed, one line each.
//
// It works in a savepoint: when this login may not change Spock's
// replication sets, the migration still commits (its DDL is this node's
// own), and the lines say what a superuser must do.
func spockReplicationSets(ctx context.Context, tx pgx.Tx, s spockState) ([]string, error) {
	const superuser = "Spock: put pgrelay's tables in replication as a superuser: run pgrelay migrate again as one " +
		"(docs/multi-master.md, On pgEdge Spock)"
	if s.schema != "" && !s.access {
		return []string{"Spock: this login may not read Spock's catalogs (schema " + s.schema + "); replication sets unchanged. " + superuser}, nil
	}
	if !s.node {
		return nil, nil
	}
	sp, err := tx.Begin(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: savepoint: %w", err)
	}
	done, err := spockSyncSets(ctx, sp, s)
	if err != nil {
		if rerr := sp.Rollback(ctx); rerr != nil {
			return nil, fmt.Errorf("migrate: %w (and rolling back to the savepoint: %v)", err, rerr)
		}
		return []string{fmt.Sprintf("Spock: replication sets unchanged: %v. %s", err, superuser)}, nil
	}
	if err := sp.Commit(ctx); err != nil {
		return nil, fmt.Errorf("migrate: release savepoint: %w", err)
	}
	return done, nil
}

// spockSyncSets makes the changes spockReplicationSets describes.
func spockSyncSets(ctx context.Context, tx pgx.Tx, s spockState) ([]string, error) {
	ext := pgx.Identifier{s.schema}.Sanitize()
	// The sets of this node each table is in.
	rows, err := tx.Query(ctx, `SELECT c.oid::pg_catalog.regclass::pg_catalog.text,
		  n.nspname OPERATOR(pg_catalog.=) 'pgrelay'::pg_catalog.name
		    AND c.relname::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.text[]),
		  COALESCE((SELECT pg_catalog.array_agg(s.set_name::pg_catalog.text ORDER BY s.set_name)
		     FROM `+ext+`.replication_set_table t
		     JOIN `+ext+`.replication_set s ON s.set_id OPERATOR(pg_catalog.=) t.set_id
		    WHERE t.set_reloid OPERATOR(pg_catalog.=) c.oid
		      AND s.set_nodeid OPERATOR(pg_catalog.=) ANY (SELECT l.node_id FROM `+ext+`.local_node l)),
		   '{}'::pg_catalog.text[])
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
		WHERE n.nspname OPERATOR(pg_catalog.=) ANY ('{pgrelay,pgrelay_notifier}'::pg_catalog.name[])
		  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p}'::pg_catalog."char"[])
		ORDER BY 1`, NodeLocalTables())
	if err != nil {
		return nil, fmt.Errorf("migrate: read Spock's replication sets: %w", err)
	}
	type table struct {
		name  string
		local bool
		sets  []string
	}
	tables, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (table, error) {
		var t table
		err := r.Scan(&t.name, &t.local, &t.sets)
		return t, err
	})
	if err != nil {
		return nil, fmt.Errorf("migrate: read Spock's replication sets: %w", err)
	}
	var done []string
	for _, t := range tables {
		switch {
		case t.local:
			for _, set := range t.sets {
				if _, err := tx.Exec(ctx, `SELECT `+ext+`.repset_remove_table($1::pg_catalog.name, $2::pg_catalog.regclass)`,
					set, t.name); err != nil {
					return nil, fmt.Errorf("migrate: take node-local %s out of Spock replication set %s: %w", t.name, set, err)
				}
				done = append(done, fmt.Sprintf("removed %s from Spock replication set %s (each node keeps its own)", t.name, set))
			}
		case len(t.sets) == 0:
			if _, err := tx.Exec(ctx, `SELECT `+ext+`.repset_add_table('default'::pg_catalog.name, $1::pg_catalog.regclass, false)`,
				t.name); err != nil {
				return nil, fmt.Errorf("migrate: add %s to Spock replication set default: %w", t.name, err)
			}
			done = append(done, fmt.Sprintf("added %s to Spock replication set default", t.name))
		}
	}
	return done, nil
}

// ReplicatingError is Up's refusal to upgrade a Spock node while it
// replicates with its peers: nodes are migrated one at a time, and a row a
// migrated node writes (a new column, a new table, a value a new CHECK
// allows) cannot apply on a peer not yet migrated. Spock then stops applying
// anything from that node until the peer is migrated (a column it does not
// know), or logs the transaction in spock.exception_log and discards it (a
// table it does not have, a constraint it breaks; exception_behaviour
// transdiscard, the default) or disables the subscription (sub_disable).
// Nothing was changed: disable every node's subscriptions, migrate and
// restart every node, then enable them again (docs/upgrading.md, Upgrading a
// Spock cluster: the restart makes Spock 5.0 forget the transaction an apply
// worker was stopped in, which it would otherwise skip).
type ReplicatingError struct {
	// Subscriptions are this node's enabled subscriptions.
	Subscriptions []string
	// Streaming are the replication slots of this node a peer streams from.
	Streaming []string
}

func (e *ReplicatingError) Error() string {
	var parts []string
	if len(e.Subscriptions) > 0 {
		parts = append(parts, "enabled subscriptions "+strings.Join(e.Subscriptions, ", "))
	}
	if len(e.Streaming) > 0 {
		parts = append(parts, "peers streaming from slots "+strings.Join(e.Streaming, ", "))
	}
	return "migrate: this Spock node replicates with its peers (" + strings.Join(parts, "; ") + "): " +
		"a row written by a migrated node does not apply on a node not yet migrated (Spock stops applying that node's changes, " +
		"or discards the transaction into spock.exception_log); disable every node's subscriptions " +
		"(SELECT spock.sub_disable(sub_name, true) FROM spock.subscription), migrate and restart every node, then enable them again " +
		"(docs/upgrading.md, Upgrading a Spock cluster); --allow-replication migrates anyway: nothing was changed"
}

// spockRefuseReplicating returns a ReplicatingError when this Spock node,
// with pgrelay installed (version > 0), has an enabled subscription or a
// peer streaming from it. A first install (version 0) is not refused: no
// pgrelay row exists yet, and the cluster's set-up migrates every node
// before any is used (docs/multi-master.md).
func spockRefuseReplicating(ctx context.Context, tx pgx.Tx, s spockState, version int, opts Options) error {
	if !s.node || version == 0 || opts.AllowReplication {
		return nil
	}
	// A login that may not read Spock's subscriptions is not refused: the
	// procedure is then the operator's (the replication sets are left to a
	// superuser too, spockReplicationSets).
	var readable bool
	if err := tx.QueryRow(ctx, `SELECT pg_catalog.has_table_privilege(pg_catalog.format('%I.subscription', $1::pg_catalog.text), 'SELECT'::pg_catalog.text)`,
		s.schema).Scan(&readable); err != nil {
		return fmt.Errorf("migrate: check access to Spock's subscriptions: %w", err)
	}
	if !readable {
		return nil
	}
	var e ReplicatingError
	if err := tx.QueryRow(ctx, `SELECT
		  COALESCE((SELECT pg_catalog.array_agg(sub_name::pg_catalog.text ORDER BY sub_name)
		     FROM `+pgx.Identifier{s.schema}.Sanitize()+`.subscription WHERE sub_enabled), '{}'::pg_catalog.text[]),
		  COALESCE((SELECT pg_catalog.array_agg(slot_name::pg_catalog.text ORDER BY slot_name)
		     FROM pg_catalog.pg_replication_slots
		    WHERE plugin OPERATOR(pg_catalog.=) 'spock_output'::pg_catalog.name
		      AND database OPERATOR(pg_catalog.=) pg_catalog.current_database() AND active), '{}'::pg_catalog.text[])`).
		Scan(&e.Subscriptions, &e.Streaming); err != nil {
		return fmt.Errorf("migrate: read whether this Spock node replicates: %w", err)
	}
	if len(e.Subscriptions) > 0 || len(e.Streaming) > 0 {
		return &e
	}
	return nil
}
