package cli

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
)

// runNodes lists the cluster's nodes, or decommissions one:
//
//	pgrelay nodes --database-url URL
//	pgrelay nodes decommission N --yes --database-url URL
func runNodes(ctx context.Context, a *app, args []string) error {
	if len(args) > 0 && args[0] == "decommission" {
		return runDecommission(ctx, a, args[1:])
	}
	fs := a.newFlags("nodes")
	url := fs.String("database-url", "", "PostgreSQL URL of any node (required)")
	deadAfter := fs.Duration("dead-after", actors.Defaults().DeadAfter, "a node silent this long is shown dead")
	watch := fs.Duration("watch", 0, "show the nodes and the replication again every this long, until interrupted (e.g. 1s)")
	limit := fs.Int("limit", 0, "with --watch: exit after this many views (default: until interrupted)")
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if *url == "" {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	if *watch < 0 || *limit < 0 || (*limit > 0 && *watch == 0) {
		return &usageError{msg: "--watch and --limit must not be negative, and --limit needs --watch"}
	}
	conn, err := connectMigrated(ctx, *url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if *watch == 0 {
		return printNodes(ctx, a.stdout, conn, *deadAfter)
	}
	tty := isTTY(a.stdout)
	tick := time.NewTicker(*watch)
	defer tick.Stop()
	for n := 1; ; n++ {
		var b strings.Builder
		if tty {
			b.WriteString("\033[H\033[2J")
		}
		fmt.Fprintf(&b, "pgrelay nodes — %s — every %s, Ctrl-C to stop\n\n", time.Now().Format("15:04:05"), *watch)
		if err := printNodes(ctx, &b, conn, *deadAfter); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if !tty {
			b.WriteString("\n")
		}
		if _, err := io.WriteString(a.stdout, b.String()); err != nil {
			return err
		}
		if n == *limit {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// printNodes writes the nodes table of pgrelay.nodes_overview(deadAfter),
// then what the node of conn replicates and, on Spock, its subscriptions,
// their lag and the apply exceptions.
func printNodes(ctx context.Context, w io.Writer, conn *pgx.Conn, deadAfter time.Duration) error {
	nodes, err := store.NodesOverview(ctx, conn, deadAfter)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tMODE\tLAST HEARTBEAT\tSTATE\tLEADER\tPROCESSORS\tPENDING\tPINNED\tHOST\tVERSION")
	for _, n := range nodes {
		state, lead := "dead", ""
		switch {
		case n.Decommissioned:
			state = "decommissioned"
		case n.Alive:
			state = "alive"
		}
		if n.Leader {
			lead = "leader"
		}
		fmt.Fprintf(tw, "%d\t%s\t%s ago\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", n.Node, n.Mode,
			time.Since(n.LastSeen).Round(time.Second), state, lead, n.Processors, n.Pending, n.Pinned, n.Hostname, n.Version)
	}
	if len(nodes) == 0 {
		fmt.Fprintln(tw, "(no node has run a Processor yet)")
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	// What this node (the database of --database-url) replicates.
	fmt.Fprintln(w)
	r, err := checkReplication(ctx, conn)
	if err != nil {
		fmt.Fprintf(w, "replication: could not check: %v\n", err)
		return nil
	}
	fmt.Fprintln(w, r.summary())
	st, ok, err := readSpockStatus(ctx, conn, r.Node)
	switch {
	case err != nil:
		fmt.Fprintf(w, "subscriptions: could not check: %v\n", err)
	case ok:
		fmt.Fprintln(w, st.lines())
	}
	return nil
}

func runDecommission(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("nodes decommission")
	url := fs.String("database-url", "", "PostgreSQL URL of any live node (required)")
	yes := fs.Bool("yes", false, "confirm: discard the node's pinned rows for good")
	deadAfter := fs.Duration("dead-after", time.Minute, "refuse a node that heartbeated more recently than this")
	// The node id comes first: pgrelay nodes decommission N [flags].
	if len(args) == 0 {
		return &usageError{msg: "usage: pgrelay nodes decommission N --yes --database-url URL"}
	}
	node, err := strconv.Atoi(args[0])
	if err != nil || node < 0 || node > 1023 {
		return &usageError{msg: fmt.Sprintf("node id %q: expected 0..1023", args[0])}
	}
	if err := a.parse(fs, args[1:]); err != nil {
		return err
	}
	if *url == "" {
		return &usageError{msg: "--database-url (or PGRELAY_DATABASE_URL) is required"}
	}
	// As decommission() (PR023): with zero or less a live node counts as
	// silent long enough.
	if *deadAfter <= 0 {
		return &usageError{msg: fmt.Sprintf("--dead-after %s: must be positive "+
			"(how long the node must have been silent)", *deadAfter)}
	}
	conn, err := connectMigrated(ctx, *url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if !*yes {
		// Say what it would do, then refuse.
		pinned, owned, err := store.NodeRows(ctx, conn, node)
		if err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "decommissioning node %d would discard %d pinned rows (logged gave_up), "+
			"hand its %d unrestricted rows to the live node that adopts (logged adopted) "+
			"and remove its Processors, keeping it in pgrelay.nodes as decommissioned\n", node, pinned, owned)
		return &usageError{msg: fmt.Sprintf("decommissioning node %d discards the rows pinned to it for good; "+
			"pass --yes to confirm", node)}
	}
	n, err := store.Decommission(ctx, conn, node, *deadAfter)
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "node %d decommissioned: %d pinned rows discarded (logged gave_up); "+
		"its unrestricted rows go to the live node that adopts (logged adopted)\n", node, n)
	return nil
}

// connectMigrated connects and checks the schema version.
func connectMigrated(ctx context.Context, url string) (*pgx.Conn, error) {
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the database: invalid --database-url: %w", err)
	}
	store.PinSearchPath(cfg)
	conn, err := pgx.ConnectConfig(cctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to the database: %w", err)
	}
	if err := schemaUpToDate(cctx, conn); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	return conn, nil
}
