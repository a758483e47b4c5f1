package devenv

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/migrations"
)

// ErrNoPglogical tells that the pglogical extension is not installed.
var ErrNoPglogical = errors.New("devenv: the pglogical extension (Debian package postgresql-15-pglogical) is not installed")

// ErrNoSpock tells that no PostgreSQL with pgEdge Spock was found.
var ErrNoSpock = errors.New("devenv: no PostgreSQL with pgEdge Spock (set SPOCK_PG_HOME to its install: bin/, lib/postgresql/spock.so)")

// ClusterDB is the database a Cluster replicates.
const ClusterDB = "relay"

// Engine is a cluster's replication extension.
type Engine string

const (
	// Pglogical is pglogical 2 from the system's PostgreSQL 15 (Debian
	// package postgresql-15-pglogical).
	Pglogical Engine = "pglogical"
	// Spock is pgEdge Spock 5, on the PostgreSQL built with Spock's patches
	// that SPOCK_PG_HOME points at.
	Spock Engine = "spock"
)

// ClusterConfig configures an active-active cluster. Zero values mean
// defaults.
type ClusterConfig struct {
	// BinDir holds the PostgreSQL binaries (see PostgresConfig); with Spock
	// the default is $SPOCK_PG_HOME/bin.
	BinDir string
	// Logger receives progress messages.
	Logger *slog.Logger
	// Engine is the replication extension. Default: Pglogical.
	Engine Engine
	// Nodes is the number of nodes, 2 to 4 (pglogical: 2). Default 2.
	Nodes int
	// Bare starts the servers only, configured for the engine: no
	// database, node, subscription or schema (a test sets them up).
	Bare bool
	// AutoDDL turns Spock's automatic DDL replication on
	// (spock.enable_ddl_replication, include_ddl_repset,
	// allow_ddl_from_functions), as pgEdge's packages install it.
	AutoDDL bool
	// Migrations, when set, holds the migration files every node is
	// migrated with instead of this pgrelay's: an older release's (a test
	// then upgrades the cluster).
	Migrations fs.FS
	// Durable keeps PostgreSQL's default durability on every node (see
	// PostgresConfig.Durable): benchmarks measure with it.
	Durable bool
}

// Cluster is a real active-active (multi-master) PostgreSQL 15 cluster on
// 127.0.0.1, every node subscribed to every other, replicating database
// ClusterDB with last-update-wins conflict resolution: two nodes with
// pglogical 2 (the project Spock was forked from, with the same replication
// model), or two to four with pgEdge Spock. Node i has pg_relay.node_id = i,
// the pgrelay schema migrated, and pgrelay's tables in replication (all but
// migrations.NodeLocalTables).
type Cluster struct {
	engine     Engine
	autoDDL    bool
	migrations fs.FS
	nodes      []*Postgres
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

// FindSpock returns the bin directory of the PostgreSQL with Spock that
// $SPOCK_PG_HOME points at, or an error wrapping ErrNoSpock.
func FindSpock() (string, error) {
	home := os.Getenv("SPOCK_PG_HOME")
	if home == "" {
		return "", fmt.Errorf("%w: SPOCK_PG_HOME is not set", ErrNoSpock)
	}
	bin := filepath.Join(home, "bin")
	if _, err := FindPGBin(bin); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoSpock, err)
	}
	if _, err := os.Stat(filepath.Join(home, "lib", "postgresql", "spock.so")); err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoSpock, err)
	}
	return bin, nil
}

// StartCluster starts the nodes, sets up replication between every pair and
// migrates them; it returns once every subscription replicates.
func StartCluster(ctx context.Context, cfg ClusterConfig) (*Cluster, error) {
	if cfg.Engine == "" {
		cfg.Engine = Pglogical
	}
	if cfg.Nodes == 0 {
		cfg.Nodes = 2
	}
	var settings map[string]string
	switch cfg.Engine {
	case Pglogical:
		if cfg.Nodes != 2 {
			return nil, fmt.Errorf("devenv: a pglogical cluster has 2 nodes, not %d", cfg.Nodes)
		}
		if err := FindPglogical(cfg.BinDir); err != nil {
			return nil, err
		}
		settings = map[string]string{
			"wal_level":                     "logical",
			"shared_preload_libraries":      "'pglogical'",
			"track_commit_timestamp":        "on", // last_update_wins needs it
			"pglogical.conflict_resolution": "'last_update_wins'",
			"max_replication_slots":         "10",
			"max_wal_senders":               "10",
			"max_worker_processes":          "16",
			"log_min_messages":              "error", // every conflict is a LOG line
		}
	case Spock:
		if cfg.Nodes < 2 || cfg.Nodes > 4 {
			return nil, fmt.Errorf("devenv: a Spock cluster has 2 to 4 nodes, not %d", cfg.Nodes)
		}
		if cfg.BinDir == "" {
			bin, err := FindSpock()
			if err != nil {
				return nil, err
			}
			cfg.BinDir = bin
		}
		ddl := "off"
		if cfg.AutoDDL {
			ddl = "on"
		}
		settings = map[string]string{
			"wal_level":                      "logical",
			"shared_preload_libraries":       "'spock'",
			"track_commit_timestamp":         "on",
			"spock.conflict_resolution":      "'last_update_wins'",
			"spock.save_resolutions":         "on",
			"spock.exception_behaviour":      "sub_disable",
			"spock.enable_ddl_replication":   ddl,
			"spock.include_ddl_repset":       ddl,
			"spock.allow_ddl_from_functions": ddl,
			"max_replication_slots":          "16",
			"max_wal_senders":                "16",
			"max_worker_processes":           "24",
			"log_min_messages":               "error",
		}
	default:
		return nil, fmt.Errorf("devenv: unknown replication engine %q", cfg.Engine)
	}
	c := &Cluster{engine: cfg.Engine, autoDDL: cfg.AutoDDL, migrations: cfg.Migrations, nodes: make([]*Postgres, cfg.Nodes)}
	for i := range c.nodes {
		p, err := StartPostgres(ctx, PostgresConfig{BinDir: cfg.BinDir, Settings: settings, Logger: cfg.Logger, Durable: cfg.Durable})
		if err != nil {
			c.Stop()
			return nil, fmt.Errorf("start node %d: %w", i+1, err)
		}
		c.nodes[i] = p
	}
	if cfg.Bare {
		return c, nil
	}
	setup, subscribe := c.setupPglogical, c.subscribePglogical
	if c.engine == Spock {
		setup, subscribe = c.setupSpock, c.subscribeSpock
	}
	for n := 1; n <= c.N(); n++ {
		if err := setup(ctx, n); err != nil {
			c.Stop()
			return nil, fmt.Errorf("set up node %d: %w", n, err)
		}
	}
	for n := 1; n <= c.N(); n++ {
		for from := 1; from <= c.N(); from++ {
			if from == n {
				continue
			}
			if err := subscribe(ctx, n, from); err != nil {
				c.Stop()
				return nil, fmt.Errorf("subscribe node %d to node %d: %w", n, from, err)
			}
		}
	}
	t0 := time.Now()
	if err := c.waitReplicating(ctx); err != nil {
		c.Stop()
		return nil, err
	}
	if c.engine == Spock {
		// As docs/multi-master.md says: `pgrelay migrate` on every node,
		// here all at once, once the cluster replicates (with AutoDDL, as
		// on a pgEdge install, DDL would replicate: migrations keep theirs
		// local and put pgrelay's tables in replication themselves).
		errs := make(chan error, c.N())
		for n := 1; n <= c.N(); n++ {
			go func() { errs <- c.migrate(ctx, n) }()
		}
		var err error
		for range c.N() {
			err = errors.Join(err, <-errs)
		}
		if err == nil {
			err = c.waitReplicating(ctx)
		}
		if err != nil {
			c.Stop()
			return nil, err
		}
	}
	if cfg.Logger != nil {
		cfg.Logger.Debug("cluster replicating", "engine", c.engine, "nodes", c.N(), "waited", time.Since(t0))
	}
	return c, nil
}

// Engine is the cluster's replication extension.
func (c *Cluster) Engine() Engine { return c.engine }

// AutoDDL tells whether Spock's automatic DDL replication is on.
func (c *Cluster) AutoDDL() bool { return c.autoDDL }

// N is the number of nodes.
func (c *Cluster) N() int { return len(c.nodes) }

// Node returns node n (1 to N).
func (c *Cluster) Node(n int) *Postgres { return c.nodes[n-1] }

// URL is node n's connection URL for ClusterDB.
func (c *Cluster) URL(n int) string { return c.nodes[n-1].URL(ClusterDB) }

// DSN is node n's connection string as the replication extension takes it.
func (c *Cluster) DSN(n int) string {
	return fmt.Sprintf("host=127.0.0.1 port=%d dbname=%s user=postgres", c.nodes[n-1].Port(), ClusterDB)
}

// createDB creates ClusterDB on node n with its node id.
func (c *Cluster) createDB(ctx context.Context, n int) error {
	p := c.nodes[n-1]
	if err := p.Exec(ctx, "postgres", "CREATE DATABASE "+ClusterDB); err != nil {
		return err
	}
	// Each node's id, for every new session of the database.
	return p.Exec(ctx, "postgres", fmt.Sprintf("ALTER DATABASE %s SET pg_relay.node_id = '%d'", ClusterDB, n))
}

func (c *Cluster) migrate(ctx context.Context, n int) error {
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return fmt.Errorf("node %d: %w", n, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := migrations.UpWith(ctx, conn, migrations.Options{Files: c.migrations}); err != nil {
		return fmt.Errorf("node %d: %w", n, err)
	}
	return nil
}

func (c *Cluster) setupPglogical(ctx context.Context, n int) error {
	if err := c.createDB(ctx, n); err != nil {
		return err
	}
	// DDL does not replicate: every node is migrated on its own.
	if err := c.migrate(ctx, n); err != nil {
		return err
	}
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pglogical"); err != nil {
		return err
	}
	if _, err := conn.Exec(ctx, "SELECT pglogical.create_node(node_name := $1, dsn := $2)",
		fmt.Sprintf("n%d", n), c.DSN(n)); err != nil {
		return err
	}
	return addPgrelayTables(ctx, conn)
}

// addPgrelayTables puts pgrelay's tables (and the notifier's, when present)
// in pglogical's default replication set; the schema version table and the
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

// setupSpock makes node n a Spock node, as docs/multi-master.md says
// (pgrelay is migrated once every node replicates).
func (c *Cluster) setupSpock(ctx context.Context, n int) error {
	if err := c.createDB(ctx, n); err != nil {
		return err
	}
	p := c.nodes[n-1]
	if err := p.Exec(ctx, ClusterDB, "CREATE EXTENSION spock"); err != nil {
		return err
	}
	return p.Exec(ctx, ClusterDB, "SELECT spock.node_create(node_name := $1, dsn := $2)",
		fmt.Sprintf("n%d", n), c.DSN(n))
}

// subscribePglogical makes node n subscribe to node from. forward_origins
// '{}' forwards only changes that originated on the provider, so nothing
// loops.
func (c *Cluster) subscribePglogical(ctx context.Context, n, from int) error {
	return c.nodes[n-1].Exec(ctx, ClusterDB, `SELECT pglogical.create_subscription(
		subscription_name := $1, provider_dsn := $2, replication_sets := '{default,ddl_sql}',
		synchronize_structure := false, synchronize_data := false, forward_origins := '{}')`,
		fmt.Sprintf("n%d_from_n%d", n, from), c.DSN(from))
}

// subscribeSpock makes node n subscribe to node from, as
// docs/multi-master.md says.
func (c *Cluster) subscribeSpock(ctx context.Context, n, from int) error {
	return c.nodes[n-1].Exec(ctx, ClusterDB, `SELECT spock.sub_create(subscription_name := $1, provider_dsn := $2,
		replication_sets := '{default,default_insert_only,ddl_sql}', synchronize_structure := false,
		synchronize_data := false, forward_origins := '{}')`,
		fmt.Sprintf("sub_n%d_n%d", n, from), c.DSN(from))
}

// status is node n's subscriptions' statuses, comma-separated.
func (c *Cluster) status(ctx context.Context, n int) string {
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return "unreachable"
	}
	defer conn.Close(context.WithoutCancel(ctx))
	q := "SELECT string_agg(status, ',' ORDER BY subscription_name) FROM pglogical.show_subscription_status()"
	if c.engine == Spock {
		q = "SELECT string_agg(status, ',' ORDER BY subscription_name) FROM spock.sub_show_status()"
	}
	var s *string
	if err := conn.QueryRow(ctx, q).Scan(&s); err != nil {
		return "unknown: " + err.Error()
	}
	if s == nil {
		return "none"
	}
	return *s
}

// waitReplicating waits until every subscription replicates, nudging a
// pglogical subscription whose first connection attempt failed (pglogical
// retries only after 10-20 s on its own).
func (c *Cluster) waitReplicating(ctx context.Context) error {
	deadline := time.Now().Add(60 * time.Second)
	lastNudge := time.Now()
	// A node is nudged once its subscriptions have not all replicated for
	// this long. On Spock not before the manager restarted a failed worker
	// on its own (spock.restart_delay_default, 5 s): the nudge disables a
	// subscription, and a worker that started meanwhile is stopped, maybe
	// inside a transaction, which Spock 5.0 then skips when the worker
	// starts again (docs/upgrading.md, Upgrading a Spock cluster).
	nudgeAfter := 1500 * time.Millisecond
	if c.engine == Spock {
		nudgeAfter = 15 * time.Second
	}
	notReady := map[int]time.Time{}
	endErrs := map[int]error{} // endOriginHolders' last failure, by node
	want := strings.TrimSuffix(strings.Repeat("replicating,", c.N()-1), ",")
	for {
		sts := make([]string, c.N())
		ok := true
		for n := 1; n <= c.N(); n++ {
			sts[n-1] = c.status(ctx, n)
			ok = ok && sts[n-1] == want
			if sts[n-1] == want {
				delete(notReady, n)
			} else if _, seen := notReady[n]; !seen {
				notReady[n] = time.Now()
			}
		}
		if ok {
			return nil
		}
		if time.Since(lastNudge) > 1500*time.Millisecond {
			lastNudge = time.Now()
			nudge := `SELECT pglogical.alter_subscription_disable(sub_name, true),
				pglogical.alter_subscription_enable(sub_name, true) FROM pglogical.subscription
				WHERE (SELECT status FROM pglogical.show_subscription_status() LIMIT 1) <> 'replicating'`
			if c.engine == Spock {
				// A Spock apply worker whose first connection failed may
				// stay down: restart it — only when no apply worker of the
				// subscription runs. Disabling does not wait for a running
				// worker to exit: enabled again at once, the subscription
				// got a second worker beside one still connecting, which
				// failed on the replication origin the first held ("already
				// active for PID ...") and left the status down.
				nudge = `SELECT spock.sub_disable(s.subscription_name::name, true), spock.sub_enable(s.subscription_name::name, true)
					FROM spock.sub_show_status() s JOIN spock.subscription sub ON sub.sub_name = s.subscription_name
					WHERE s.status = 'down' AND NOT EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
						WHERE a.backend_type = pg_catalog.format('spock apply %s:%s',
							(SELECT d.oid FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()), sub.sub_id))`
			}
			for n := 1; n <= c.N(); n++ {
				if since, bad := notReady[n]; bad && time.Since(since) > nudgeAfter {
					_ = c.nodes[n-1].Exec(ctx, ClusterDB, nudge)
					if c.engine == Spock {
						// A failure leaves the node down: the deadline
						// reports it.
						if _, err := c.endOriginHolders(ctx, n); err != nil {
							endErrs[n] = err
						}
					}
				}
			}
		}
		if time.Now().After(deadline) {
			var logs strings.Builder
			for n := 1; n <= c.N(); n++ {
				if !strings.HasPrefix(sts[n-1], want) {
					fmt.Fprintf(&logs, "\nnode %d's log:\n%s%s", n, c.nodes[n-1].logTail(), c.originHolders(ctx, n))
					if err := endErrs[n]; err != nil {
						fmt.Fprintf(&logs, "\nending its origin holders failed: %v", err)
					}
				}
			}
			return fmt.Errorf("devenv: %s subscriptions not replicating after 60s (%s)%s", c.engine, strings.Join(sts, "; "), logs.String())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// originHolders is, for a node whose apply workers fail on a replication
// origin another process holds ("already active for PID N"), what that
// process is and what it logged: the tail of the log shows only the failing
// workers, which Spock starts again every few seconds.
func (c *Cluster) originHolders(ctx context.Context, n int) string {
	p := c.nodes[n-1]
	raw, err := os.ReadFile(p.logFile)
	if err != nil {
		return ""
	}
	var out strings.Builder
	for _, h := range originHolderLogs(string(raw)) {
		fmt.Fprintf(&out, "\nthe origin's holder, PID %s:", h.pid)
		if conn, err := pgx.Connect(ctx, c.URL(n)); err == nil {
			var row string
			err := conn.QueryRow(ctx, `SELECT COALESCE((SELECT pg_catalog.format('%s, %s, state %s, waiting on %s:%s since %s',
				  a.backend_type, a.backend_start, a.state, a.wait_event_type, a.wait_event, a.state_change)
				FROM pg_catalog.pg_stat_activity a WHERE a.pid OPERATOR(pg_catalog.=) $1::pg_catalog.int4), 'not running')`, h.pid).Scan(&row)
			if err != nil {
				row = "unknown: " + err.Error()
			}
			fmt.Fprintf(&out, " %s", row)
			_ = conn.Close(ctx)
		}
		for _, line := range h.lines {
			fmt.Fprintf(&out, "\n  %s", line)
		}
	}
	return out.String()
}

// endOriginHolders ends, on node n, the Spock apply workers that its log
// names as holding a replication origin other apply workers failed on
// ("already active for PID N"), if idle between transactions, and returns
// their PIDs. Spock 5.0.11's manager can count two workers for one
// subscription: every few seconds it restarts the one it finds first, which
// fails on the origin the other, connected and streaming, holds, and the
// subscription stays down (a clean-clone run: the holder had logged only
// "connected" and waited idle for a minute). Ended, the holder is restarted
// by the manager as the subscription's one worker; idle, it was in no
// transaction that a restart could skip.
func (c *Cluster) endOriginHolders(ctx context.Context, n int) ([]int, error) {
	raw, err := os.ReadFile(c.nodes[n-1].logFile)
	if err != nil {
		return nil, fmt.Errorf("read node %d's log: %w", n, err)
	}
	var pids []int
	for _, h := range originHolderLogs(string(raw)) {
		if pid, err := strconv.Atoi(h.pid); err == nil {
			pids = append(pids, pid)
		}
	}
	if len(pids) == 0 {
		return nil, nil
	}
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return nil, fmt.Errorf("connect to node %d: %w", n, err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	rows, err := conn.Query(ctx, `SELECT a.pid FROM pg_catalog.pg_stat_activity a
		WHERE a.pid OPERATOR(pg_catalog.=) ANY ($1::pg_catalog.int4[]) AND a.backend_type OPERATOR(pg_catalog.~~) 'spock apply %'
		  AND a.state OPERATOR(pg_catalog.=) 'idle' AND pg_catalog.pg_terminate_backend(a.pid)`, pids)
	if err != nil {
		return nil, fmt.Errorf("end the origin holders %v on node %d: %w", pids, n, err)
	}
	ended, err := pgx.CollectRows(rows, pgx.RowTo[int32])
	if err != nil {
		return nil, fmt.Errorf("end the origin holders %v on node %d: %w", pids, n, err)
	}
	out := make([]int, len(ended))
	for i, pid := range ended {
		out[i] = int(pid)
	}
	return out, nil
}

// originHolder finds the holder's PID in Spock's apply error.
var originHolder = regexp.MustCompile(`replication origin with ID \d+ is already active for PID (\d+)`)

// holderLog is a process that held a replication origin others failed on,
// and the lines it logged.
type holderLog struct {
	pid   string
	lines []string
}

// originHolderLogs finds in a server's log the processes named as holding a
// replication origin, in the order first named, each with its own lines.
func originHolderLogs(log string) []holderLog {
	var out []holderLog
	seen := map[string]bool{}
	for _, m := range originHolder.FindAllStringSubmatch(log, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			out = append(out, holderLog{pid: m[1]})
		}
	}
	for i := range out {
		for _, line := range strings.Split(log, "\n") {
			if strings.Contains(line, "["+out[i].pid+"]") {
				out[i].lines = append(out[i].lines, line)
			}
		}
	}
	return out
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

// WaitReplicating waits until every subscription replicates again, nudging a
// pglogical one whose connection attempts failed while its provider was down.
func (c *Cluster) WaitReplicating(ctx context.Context) error { return c.waitReplicating(ctx) }

// ExecBoth runs sql on every node, each on its own: with Spock's automatic
// DDL replication on, its session turns it off (tables made so stay local).
func (c *Cluster) ExecBoth(ctx context.Context, sql string) error {
	if c.engine == Spock {
		sql = "SET spock.enable_ddl_replication = off; SET spock.include_ddl_repset = off;\n" + sql
	}
	for n := 1; n <= c.N(); n++ {
		if err := c.nodes[n-1].Exec(ctx, ClusterDB, sql); err != nil {
			return fmt.Errorf("node %d: %w", n, err)
		}
	}
	return nil
}

// Replicate adds tables (created on every node with ExecBoth) to replication.
func (c *Cluster) Replicate(ctx context.Context, tables ...string) error {
	q := `SELECT pglogical.replication_set_add_table('default', $1::regclass, synchronize_data := false)`
	if c.engine == Spock {
		q = `SELECT spock.repset_add_table('default', $1::regclass)`
	}
	for n := 1; n <= c.N(); n++ {
		for _, t := range tables {
			if err := c.nodes[n-1].Exec(ctx, ClusterDB, q, t); err != nil {
				return fmt.Errorf("node %d: replicate %s: %w", n, t, err)
			}
		}
	}
	return nil
}

// Stop stops every node and removes their directories.
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
	for n := 1; n <= c.N(); n++ {
		if c.nodes[n-1] != nil {
			fmt.Fprintf(&b, "node %d: %s  ", n, c.URL(n))
		}
	}
	return strings.TrimSpace(b.String())
}

// Health is what a Spock cluster's catalogs say of its replication: apply
// errors, subscriptions not replicating, and the conflicts Spock resolved on
// pgrelay's tables.
type Health struct {
	// Exceptions are spock.exception_log's rows, "node N: table: error
	// (every other column, as JSON)", on every node.
	Exceptions []string
	// NotReplicating names the subscriptions whose status is not
	// 'replicating' ("node N: sub=status", then the tail of node N's log).
	NotReplicating []string
	// Resolutions counts spock.resolutions' rows on tables of schemas
	// pgrelay and pgrelay_notifier, on every node, by
	// "table conflict_type/conflict_resolution".
	Resolutions map[string]int
	// Samples holds, for each key of Resolutions, the local and remote
	// tuples of its latest row on one node.
	Samples map[string]string
}

// Health reads the Spock cluster's health on every node.
func (c *Cluster) Health(ctx context.Context) (Health, error) {
	h := Health{Resolutions: map[string]int{}, Samples: map[string]string{}}
	if c.engine != Spock {
		return h, fmt.Errorf("devenv: Health reads Spock's catalogs; this cluster runs %s", c.engine)
	}
	for n := 1; n <= c.N(); n++ {
		conn, err := pgx.Connect(ctx, c.URL(n))
		if err != nil {
			return h, fmt.Errorf("node %d: %w", n, err)
		}
		err = func() error {
			defer conn.Close(context.WithoutCancel(ctx))
			// Every column of the row, the error first.
			rows, err := conn.Query(ctx, `SELECT format('node %s: %s.%s: %s (%s)', $1::int, e.table_schema, e.table_name, e.error_message,
				  left((to_jsonb(e) - 'error_message')::text, 1500))
				FROM spock.exception_log e ORDER BY e.retry_errored_at`, n)
			if err != nil {
				return err
			}
			ex, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			if len(ex) > 0 {
				// Spock's apply worker logs the error the row met.
				ex[len(ex)-1] += "\n" + c.nodes[n-1].logTail()
			}
			h.Exceptions = append(h.Exceptions, ex...)
			rows, err = conn.Query(ctx, `SELECT format('node %s: %s=%s', $1::int, subscription_name, status)
				FROM spock.sub_show_status() WHERE status <> 'replicating' ORDER BY 1`, n)
			if err != nil {
				return err
			}
			bad, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			for _, b := range bad {
				h.NotReplicating = append(h.NotReplicating, b+"\n"+c.nodes[n-1].logTail())
			}
			rows, err = conn.Query(ctx, `SELECT format('%s %s/%s', relname, conflict_type, conflict_resolution), count(*)::int,
				  (array_agg(format('node %s: local %s remote %s', $1::int, local_tuple, remote_tuple) ORDER BY id DESC))[1]
				FROM spock.resolutions WHERE relname LIKE 'pgrelay.%' OR relname LIKE 'pgrelay\_notifier.%'
				GROUP BY 1`, n)
			if err != nil {
				return err
			}
			defer rows.Close()
			for rows.Next() {
				var k, sample string
				var v int
				if err := rows.Scan(&k, &v, &sample); err != nil {
					return err
				}
				h.Resolutions[k] += v
				h.Samples[k] = sample
			}
			return rows.Err()
		}()
		if err != nil {
			return h, fmt.Errorf("node %d: read Spock's health: %w", n, err)
		}
	}
	return h, nil
}

// Sync waits until every running node has applied everything every other
// running node committed before the call: spock.sync_event() on each,
// CALL spock.wait_for_sync_event(…) on every other (at most timeout each).
// Nodes in skip are left out (stopped).
func (c *Cluster) Sync(ctx context.Context, timeout time.Duration, skip ...int) error {
	if c.engine != Spock {
		return fmt.Errorf("devenv: Sync uses Spock's sync events; this cluster runs %s", c.engine)
	}
	down := map[int]bool{}
	for _, n := range skip {
		down[n] = true
	}
	for from := 1; from <= c.N(); from++ {
		if down[from] {
			continue
		}
		var lsn string
		if err := c.queryRow(ctx, from, "SELECT spock.sync_event()::text", nil, &lsn); err != nil {
			return fmt.Errorf("node %d: sync_event: %w", from, err)
		}
		for n := 1; n <= c.N(); n++ {
			if n == from || down[n] {
				continue
			}
			var ok bool
			if err := c.queryRow(ctx, n, "CALL spock.wait_for_sync_event(NULL, $1::name, $2::pg_lsn, $3::int)",
				[]any{fmt.Sprintf("n%d", from), lsn, int(timeout.Seconds())}, &ok); err != nil {
				return fmt.Errorf("node %d: wait for node %d's sync event: %w", n, from, err)
			}
			if !ok {
				return fmt.Errorf("devenv: node %d did not apply node %d's changes within %s", n, from, timeout)
			}
		}
	}
	return nil
}

func (c *Cluster) queryRow(ctx context.Context, n int, sql string, args []any, dest ...any) error {
	conn, err := pgx.Connect(ctx, c.URL(n))
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	return conn.QueryRow(ctx, sql, args...).Scan(dest...)
}
