package testenv

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/migrations"
)

// ErrNoPglogical tells that the pglogical extension is not installed.
var ErrNoPglogical = errors.New("testenv: the pglogical extension (Debian package postgresql-15-pglogical) is not installed")

// ClusterDB is the database a Cluster replicates.
const ClusterDB = "relay"

// ClusterConfig configures a two-node active-active cluster. Zero values mean
// defaults.
type ClusterConfig struct {
	// BinDir holds the PostgreSQL binaries (see PostgresConfig).
	BinDir string
	// Logger receives progress messages.
	Logger *slog.Logger
}

// Cluster is a real two-node active-active (multi-master) PostgreSQL 15 pair
// on 127.0.0.1, replicating database ClusterDB both ways with pglogical 2 —
// the project Spock was forked from, with the same replication model and
// last-update-wins conflict resolution. Node i (1 or 2) has pg_relay.node_id
// = i, the pgrelay schema migrated, and pgrelay's tables in replication.
type Cluster struct {
	nodes [2]*Postgres
}

// FindPglogical checks that pglogical is installed for the server in binDir.
func FindPglogical(binDir string) error {
	bin, err := FindPGBin(binDir)
	if err != nil {
		return err
	}
	lib := filepath.Join(filepath.Dir(bin), "lib", "pglogical.so")
	if _, err := os.Stat(lib); err != nil {
		return fmt.Errorf("%w (%s missing): 'apt-get install postgresql-15-pglogical' as root", ErrNoPglogical, lib)
	}
	return nil
}

// StartCluster starts both nodes, migrates them, and sets up replication in
// both directions; it returns once both subscriptions replicate.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if err := FindPglogical(cfg.BinDir); err != nil {
		return nil, err
	}
	settings := map[string]string{
		"wal_level":                     "logical",
		"shared_preload_libraries":      "'pglogical'",
		"track_commit_timestamp":        "on", // last_update_wins needs it
		"pglogical.conflict_resolution": "'last_update_wins'",
		"max_replication_slots":         "10",
		"max_wal_senders":               "10",
		"max_worker_processes":          "16",
		"log_min_messages":              "error", // every conflict is a LOG line
	}
	c := &Cluster{}
	for i := range c.nodes {
		p, err := StartPostgres(ctx, PostgresConfig{BinDir: cfg.BinDir, Settings: settings, Logger: cfg.Logger})
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
		c.nodes[i] = p
	}
	for n := 1; n <= 2; n++ {
		if err := c.setupNode(ctx, n); err != nil {
			c.Stop()
			return nil, fmt.Errorf("set up node %d: %w", n, err)
		}
	}
	for n := 1; n <= 2; n++ {
		if err := c.subscribe(ctx, n, 3-n); err != nil {
			c.Stop()
			return nil, fmt.Errorf("subscribe node %d to node %d: %w", n, 3-n, err)
		}
	}
	t0 := time.Now()
	if err := c.waitReplicating(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if cfg.Logger != nil {
		cfg.Logger.Debug("cluster replicating", "waited", time.Since(t0))
	}
	return c, nil
}

// Node returns node n (1 or 2).
func (c *Cluster) Node(n int) *Postgres { return c.nodes[n-1] }

// URL is node n's connection URL for ClusterDB.
func (c *Cluster) URL(n int) string { return c.nodes[n-1].URL(ClusterDB) }

func (c *Cluster) dsn(n int) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=postgres", c.nodes[n-1].Port(), ClusterDB)
}

func (c *Cluster) setupNode(ctx context.Context, n int) error {
	p := c.nodes[n-1]
	if err := p.Exec(ctx, "postgres", "CREATE DATABASE "+ClusterDB); err != nil {
		return err
	}
	// Each node's id, for every new session of the database.
	if err := p.Exec(ctx, "postgres", fmt.Sprintf("ALTER DATABASE %s SET pg_relay.node_id = '%d'", ClusterDB, n)); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	// DDL does not replicate: every node is migrated on its own.
	if _, err := migrations.Up(ctx, conn); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pglogical"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pglogical.create_node(node_name := $1, dsn := $2)",
		fmt.Sprintf("n%d", n), c.dsn(n)); err != nil {
		return err
	}
	return addPgrelayTables(ctx, conn)
}

// addPgrelayTables puts pgrelay's tables (and the notifier's, when present)
// in the default replication set; the schema version table and the
// channels' lock rows (node-local, like the locks they carry) stay local.
func addPgrelayTables(ctx context.Context, conn *pgx.Conn) error {
	rows, err := conn.Query(ctx, `SELECT format('%I.%I', schemaname, tablename) FROM pg_tables
		WHERE schemaname IN ('pgrelay', 'pgrelay_notifier')
		  AND NOT (schemaname = 'pgrelay' AND tablename = ANY($1::text[]))
		ORDER BY 1`, migrations.NodeLocalTables())
	if err != nil {
		return err
	}
	tables, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return err
	}
	for _, t := range tables {
		if _, err := conn.Exec(ctx, `SELECT pglogical.replication_set_add_table('default', $1::regclass,
			synchronize_data := false)`, t); err != nil {
			return fmt.Errorf("replicate %s: %w", t, err)
		}
	}
	return nil
}

// subscribe makes node n subscribe to node from. forward_origins '{}' forwards
// only changes that originated on the provider, so nothing loops.
func (c *Cluster) subscribe(ctx context.Context, n, from int) error {
	return c.nodes[n-1].Exec(ctx, ClusterDB, `SELECT pglogical.create_subscription(
		subscription_name := $1, provider_dsn := $2, replication_sets := '{default,ddl_sql}',
		synchronize_structure := false, synchronize_data := false, forward_origins := '{}')`,
		fmt.Sprintf("n%d_from_n%d", n, from), c.dsn(from))
}

func (c *Cluster) status(ctx context.Context, n int) string {
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return "unreachable"
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var s string
	if err := conn.QueryRow(ctx, "SELECT status FROM pglogical.show_subscription_status()").Scan(&s); err != nil {
		return "unknown: " + err.Error()
	}
	return s
}

// waitReplicating waits until both subscriptions replicate, nudging a
// subscription whose first connection attempt failed (pglogical retries only
// after 10-20 s on its own).
func (c *Cluster) waitReplicating(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	lastNudge := time.Now()
	for {
		s1, s2 := c.status(ctx, 1), c.status(ctx, 2)
		if s1 == "replicating" && s2 == "replicating" {
			return nil
		}
		if time.Since(lastNudge) > 1500*time.Millisecond {
			lastNudge = time.Now()
			for n := 1; n <= 2; n++ {
				_ = c.nodes[n-1].Exec(ctx, ClusterDB, `SELECT pglogical.alter_subscription_disable(sub_name, true),
					pglogical.alter_subscription_enable(sub_name, true) FROM pglogical.subscription
					WHERE (SELECT status FROM pglogical.show_subscription_status() LIMIT 1) <> 'replicating'`)
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("testenv: subscriptions not replicating after 60s (n1=%s, n2=%s)", s1, s2)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// StopNode shuts node n's server down (fast shutdown), keeping its data: the
// other node keeps running, and what it writes meanwhile waits in its
// replication slot.
func (c *Cluster) StopNode(n int) error {
	return c.nodes[n-1].stopWith(syscall.SIGINT, 30*time.Second)
}

// StartNode starts node n's server again on the same port and returns once it
// accepts connections; it does not wait for replication to catch up (see
// WaitReplicating).
func (c *Cluster) StartNode(ctx context.Context, n int) error {
	return c.nodes[n-1].Start(ctx)
}

// WaitReplicating waits until both subscriptions replicate again, nudging one
// whose connection attempts failed while its provider was down.
func (c *Cluster) WaitReplicating(ctx context.Context) error { return c.waitReplicating(ctx) }

// ExecBoth runs sql on both nodes (DDL does not replicate).
func (c *Cluster) ExecBoth(ctx context.Context, sql string) error {
	for n := 1; n <= 2; n++ {
		if err := c.nodes[n-1].Exec(ctx, ClusterDB, sql); err != nil {
			return fmt.Errorf("node %d: %w", n, err)
		}
	}
	return nil
}

// Replicate adds tables (created on both nodes with ExecBoth) to replication.
func (c *Cluster) Replicate(ctx context.Context, tables ...string) error {
	for n := 1; n <= 2; n++ {
		for _, t := range tables {
			if err := c.nodes[n-1].Exec(ctx, ClusterDB, `SELECT pglogical.replication_set_add_table('default', $1::regclass,
				synchronize_data := false)`, t); err != nil {
				return fmt.Errorf("node %d: replicate %s: %w", n, t, err)
			}
		}
	}
	return nil
}

// Stop stops both nodes and removes their directories.
func (c *Cluster) Stop() {
	for _, p := range c.nodes {
		if p != nil {
			_ = p.Stop()
		}
	}
}

// String describes the cluster.
func (c *Cluster) String() string {
	var b strings.Builder
	for n := 1; n <= 2; n++ {
		if c.nodes[n-1] != nil {
			fmt.Fprintf(&b, "node %d: %s  ", n, c.URL(n))
		}
	}
	return strings.TrimSpace(b.String())
}
