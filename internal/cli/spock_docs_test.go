package cli_test

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// docBlock is one SQL block of docs/multi-master.md's Spock section and the
// nodes it runs on.
type docBlock struct {
	nodes []int
	sql   string
}

// spockDocBlocks reads the SQL blocks of the section "On pgEdge Spock" of
// docs/multi-master.md. Each must follow a marker `<!-- spock-docs: n1 n2 -->`
// naming the nodes it runs on.
func spockDocBlocks(t *testing.T) []docBlock {
	t.Helper()
	b, err := os.ReadFile("../../docs/multi-master.md")
	require.NoError(t, err)
	doc := string(b)
	start := strings.Index(doc, "### On pgEdge Spock\n")
	require.Positive(t, start, "the Spock section")
	end := strings.Index(doc[start:], "\n### On pglogical 2\n")
	require.Positive(t, end)
	section := doc[start : start+end]
	re := regexp.MustCompile("(?s)(<!-- spock-docs: ([n0-9 ]+) -->\n)?```sql\n(.*?)```")
	var out []docBlock
	for _, m := range re.FindAllStringSubmatch(section, -1) {
		require.NotEmpty(t, m[1], "an SQL block of the Spock section without a spock-docs marker (so no test runs it):\n%s", m[3])
		var blk docBlock
		for _, f := range strings.Fields(m[2]) {
			var n int
			_, err := fmt.Sscanf(f, "n%d", &n)
			require.NoError(t, err, f)
			blk.nodes = append(blk.nodes, n)
		}
		blk.sql = m[3]
		out = append(out, blk)
	}
	return out
}

// Every SQL statement of docs/multi-master.md's Spock section, run as written
// (but for the hosts) on three Spock servers, in the order the section gives:
// nodes, subscriptions, pgrelay migrate on every node, a third node added to
// the running cluster with its data copied from node 1; then pgrelay's rows
// of every node are on every node, the node-local tables in no set, and
// spock.exception_log empty.
func TestSpockDocs(t *testing.T) {
	ctx := context.Background()
	blocks := spockDocBlocks(t)
	c := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 3, Bare: true})
	for n := 1; n <= 3; n++ {
		require.NoError(t, c.Node(n).Exec(ctx, "postgres", "CREATE DATABASE app"))
	}
	url := func(n int) string { return c.Node(n).URL("app") }
	hosts := strings.NewReplacer(
		"host=n1.example port=5432", fmt.Sprintf("host=127.0.0.1 port=%d", c.Node(1).Port()),
		"host=n2.example port=5432", fmt.Sprintf("host=127.0.0.1 port=%d", c.Node(2).Port()),
		"host=n3.example port=5432", fmt.Sprintf("host=127.0.0.1 port=%d", c.Node(3).Port()))
	query := func(n int, sql string) [][]any {
		conn, err := pgx.Connect(ctx, url(n))
		require.NoError(t, err)
		defer conn.Close(ctx)
		// Simple protocol: a block is several statements; the rows are those
		// of each.
		res := conn.PgConn().Exec(ctx, sql)
		results, err := res.ReadAll()
		require.NoError(t, err, "node %d:\n%s", n, sql)
		var rows [][]any
		for _, r := range results {
			for _, row := range r.Rows {
				var vals []any
				for _, v := range row {
					vals = append(vals, string(v))
				}
				rows = append(rows, vals)
			}
		}
		return rows
	}
	migrate := func(ns ...int) {
		errs := make(chan string, len(ns))
		for _, n := range ns {
			go func() {
				code, out, errOut := cliMain("migrate", "--database-url", url(n))
				if code != 0 {
					errs <- fmt.Sprintf("node %d: %s", n, errOut)
					return
				}
				if !strings.Contains(out, "added pgrelay.queue to Spock replication set default\n") {
					errs <- fmt.Sprintf("node %d: %s", n, out)
					return
				}
				errs <- ""
			}()
		}
		for range ns {
			require.Empty(t, <-errs)
		}
	}
	replicating := func(n int) bool {
		rows := query(n, "SELECT status FROM spock.sub_show_status()")
		for _, r := range rows {
			if r[0] != "replicating" {
				return false
			}
		}
		return len(rows) > 0
	}
	migrated := map[int]bool{}
	ran := 0
	var syncLSN string
	for i, blk := range blocks {
		sql := hosts.Replace(blk.sql)
		switch {
		case strings.Contains(sql, "FROM spock.sub_show_status()"):
			// The check the section gives: every row replicating.
			for _, n := range blk.nodes {
				testenv.Eventually(t, time.Minute, fmt.Sprint("node ", n, "'s subscriptions to replicate"), func() bool { return replicating(n) })
			}
			ran++
			continue
		case strings.Contains(sql, "FROM spock.tables"):
			// pgrelay migrate on every node comes first (in prose), at once.
			var todo []int
			for _, n := range blk.nodes {
				if !migrated[n] {
					todo = append(todo, n)
					migrated[n] = true
				}
			}
			migrate(todo...)
			for _, n := range blk.nodes {
				sets := map[string]string{}
				for _, r := range query(n, sql) {
					sets[r[0].(string)+"."+r[1].(string)] = r[2].(string)
				}
				// Spock lists the tables it could replicate: not the unlogged ones.
				tables := query(n, `SELECT count(*) FROM pg_catalog.pg_class c
					JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace
					WHERE s.nspname IN ('pgrelay', 'pgrelay_notifier') AND c.relkind = 'r' AND c.relpersistence = 'p'`)
				require.Equal(t, tables[0][0], fmt.Sprint(len(sets)), "node %d: one row per logged table: %v", n, sets)
				local := map[string]bool{}
				for _, l := range migrations.NodeLocalTables() {
					local["pgrelay."+l] = true
				}
				for table, set := range sets {
					want := "default"
					if local[table] {
						want = ""
					}
					require.Equal(t, want, set, "node %d: %s", n, table)
				}
			}
			ran++
			// Work of both nodes, there before the third node comes.
			query(1, `SELECT pgrelay.register('docs', 'SELECT $1'); SELECT pgrelay.notify('docs', 'from-1')`)
			testenv.Eventually(t, 20*time.Second, "the channel on node 2", func() bool {
				return query(2, `SELECT 1 FROM pgrelay.channels WHERE channel = 'docs'`) != nil
			})
			query(2, `SELECT pgrelay.notify('docs', 'from-2')`)
			continue
		case strings.Contains(sql, "spock.sync_event()"):
			// Node 2's sync event: its LSN goes into the wait below (the
			// docs show an example value), which must end true.
			rows := query(blk.nodes[0], sql)
			require.Len(t, rows, 1)
			syncLSN = rows[0][0].(string)
			ran++
			continue
		case strings.Contains(sql, "spock.wait_for_sync_event("):
			require.NotEmpty(t, syncLSN, "the sync event comes first")
			for _, n := range blk.nodes {
				require.Equal(t, [][]any{{"t"}}, query(n, strings.Replace(sql, "'0/3A2B1C8'", "'"+syncLSN+"'", 1)),
					"node %d applied node 2's writes within the wait", n)
			}
			// What it proves: node 1 has node 2's row before node 3 copies
			// from it.
			require.NotNil(t, query(1, `SELECT 1 FROM pgrelay.queue WHERE channel = 'docs' AND payload = 'from-2'`))
			ran++
			continue
		case strings.Contains(sql, "'sub_n1_n3'") && !migrated[3]:
			// Node 3 is migrated before the others subscribe to it.
			migrate(3)
			migrated[3] = true
		}
		for _, n := range blk.nodes {
			query(n, sql)
		}
		ran++
		t.Logf("block %d ran on nodes %v", i+1, blk.nodes)
	}
	require.Equal(t, len(blocks), ran)
	for n := 1; n <= 3; n++ {
		testenv.Eventually(t, time.Minute, fmt.Sprint("node ", n, "'s subscriptions to replicate"), func() bool { return replicating(n) })
	}
	// Node 3 has the rows of nodes 1 and 2 (copied from node 1), and a row
	// it enqueues reaches both.
	for _, p := range []string{"from-1", "from-2"} {
		testenv.Eventually(t, 30*time.Second, "row "+p+" on node 3", func() bool {
			return query(3, `SELECT 1 FROM pgrelay.queue WHERE channel = 'docs' AND payload = '`+p+`'`) != nil
		})
	}
	query(3, `SELECT pgrelay.notify('docs', 'from-3')`)
	for n := 1; n <= 2; n++ {
		testenv.Eventually(t, 30*time.Second, fmt.Sprint("node 3's row on node ", n), func() bool {
			return query(n, `SELECT 1 FROM pgrelay.queue WHERE channel = 'docs' AND payload = 'from-3' AND owner_node = 3`) != nil
		})
	}
	for n := 1; n <= 3; n++ {
		require.Equal(t, [][]any{{"64"}}, query(n, `SELECT count(*) FROM pgrelay.channel_locks WHERE channel = 'docs'`))
		require.Empty(t, query(n, `SELECT error_message FROM spock.exception_log`), "node %d", n)
		code, out, errOut := cliMain("nodes", "--database-url", url(n))
		require.Equal(t, 0, code, errOut)
		require.Contains(t, out, fmt.Sprintf("replication (node %d, spock): every table of pgrelay and pgrelay_notifier is in a subscribed replication set", n))
	}
}

// On a Spock node, an owner login that is not a superuser (the DBA guide's
// install) migrates all the same: it may not read Spock's catalogs, so
// pgrelay migrate leaves the replication sets alone and says that a
// superuser must put the tables in; one who may read them but not call
// spock.repset_add_table is told the same, with the error; a superuser's
// pgrelay migrate then does it.
func TestSpockMigrateWithoutSuperuser(t *testing.T) {
	ctx := context.Background()
	c := testenv.ClusterT(t, devenv.ClusterConfig{Engine: devenv.Spock, Nodes: 2, Bare: true})
	p := c.Node(1)
	for _, sql := range []string{"CREATE ROLE owner LOGIN CREATEROLE", "CREATE DATABASE app", "GRANT CREATE ON DATABASE app TO owner"} {
		require.NoError(t, p.Exec(ctx, "postgres", sql))
	}
	require.NoError(t, p.Exec(ctx, "app", "CREATE EXTENSION spock"))
	require.NoError(t, p.Exec(ctx, "app", "SELECT spock.node_create(node_name := 'n1', dsn := $1)",
		fmt.Sprintf("host=127.0.0.1 port=%d dbname=app user=postgres", p.Port())))
	owner := strings.Replace(p.URL("app"), "postgres://postgres@", "postgres://owner@", 1)

	code, out, errOut := runCLI(t, nil, "migrate", "--database-url", owner)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "schema at version ")
	require.Contains(t, out, "Spock: this login may not read Spock's catalogs (schema spock); replication sets unchanged. "+
		"Spock: put pgrelay's tables in replication as a superuser")

	// It may read the catalogs, but Spock's function is closed to it.
	require.NoError(t, p.Exec(ctx, "app", `GRANT USAGE ON SCHEMA spock TO owner; GRANT SELECT ON ALL TABLES IN SCHEMA spock TO owner;
		REVOKE EXECUTE ON FUNCTION spock.repset_add_table(name, regclass, boolean, text[], text, boolean) FROM PUBLIC`))
	code, out, errOut = runCLI(t, nil, "migrate", "--database-url", owner)
	require.Equal(t, 0, code, "%s%s", out, errOut)
	// The first table in name order is refused; the message names it.
	require.Regexp(t, `(?m)^Spock: replication sets unchanged: migrate: add pgrelay\.[a-z_]+ to Spock replication set default: .+\. `+
		`Spock: put pgrelay's tables in replication as a superuser`, out)

	code, out, errOut = runCLI(t, nil, "migrate", "--database-url", p.URL("app"))
	require.Equal(t, 0, code, "%s%s", out, errOut)
	require.Contains(t, out, "added pgrelay.queue to Spock replication set default\n")
}
