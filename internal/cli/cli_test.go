package cli_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/version"
	"github.com/pgrelay/pgrelay/migrations"
)

var commandNames = []string{"migrate", "run", "dev", "stats", "version"}

func TestVersion(t *testing.T) {
	t.Parallel()
	code, out, errOut := cliMain("version")
	assert.Equal(t, 0, code)
	// A test binary carries no VCS stamp: the line says so rather than
	// inventing a commit (versionLine's own test covers stamped builds).
	assert.Equal(t, "pgrelay "+version.Release+" (commit unknown: built outside a git checkout)\n", out)
	assert.Empty(t, errOut)

	code, _, errOut = cliMain("version", "extra")
	assert.Equal(t, 2, code)
	assert.Contains(t, errOut, `unexpected argument "extra"`)
}

func TestUsage(t *testing.T) {
	t.Parallel()
	assertUsage := func(t *testing.T, s string) {
		t.Helper()
		assert.Contains(t, s, "Usage: pgrelay <command> [flags]")
		for _, c := range commandNames {
			assert.Contains(t, s, "\n  "+c+" ", "usage lists %s", c)
		}
		assert.Contains(t, s, "PGRELAY_DATABASE_URL")
	}

	t.Run("unknown command", func(t *testing.T) {
		code, out, errOut := cliMain("frobnicate", "--database-url", "x")
		assert.Equal(t, 2, code)
		assert.Empty(t, out)
		assert.True(t, strings.HasPrefix(errOut, `pgrelay: unknown command "frobnicate"`), errOut)
		assertUsage(t, errOut)
	})
	t.Run("no command", func(t *testing.T) {
		code, out, errOut := cliMain()
		assert.Equal(t, 2, code)
		assert.Empty(t, out)
		assertUsage(t, errOut)
	})
	for _, h := range []string{"-h", "--help", "help"} {
		t.Run(h, func(t *testing.T) {
			code, _, errOut := cliMain(h)
			assert.Equal(t, 0, code)
			assertUsage(t, errOut)
		})
	}
	t.Run("command -h", func(t *testing.T) {
		code, _, errOut := cliMain("run", "-h")
		assert.Equal(t, 0, code)
		for _, f := range []string{"-database-url", "-node-id", "-concurrency", "-shutdown-timeout",
			"-heartbeat-interval", "-dead-after", "-log-level"} {
			assert.Contains(t, errOut, f)
		}
	})
	t.Run("unknown flag", func(t *testing.T) {
		code, _, errOut := cliMain("migrate", "--frobnicate")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "flag provided but not defined: -frobnicate")
	})
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	all, err := migrations.All()
	require.NoError(t, err)
	require.NotEmpty(t, all)
	latest := migrations.Latest()
	var applied strings.Builder
	for _, m := range all {
		fmt.Fprintf(&applied, "applied %04d_%s\n", m.Version, m.Name)
	}
	wantFirst := applied.String() + "applied the function files (migrations/functions)\n" +
		fmt.Sprintf("schema at version %d\n", latest)
	wantAgain := fmt.Sprintf("schema at version %d\n", latest)
	require.True(t, strings.HasPrefix(wantFirst, "applied 0001_pgrelay\n"), wantFirst)

	schemaVersions := func(t *testing.T, url string) []int {
		t.Helper()
		c, err := pgx.Connect(context.Background(), url)
		require.NoError(t, err)
		defer c.Close(context.Background())
		rows, err := c.Query(context.Background(), "SELECT version FROM pgrelay.schema_migrations ORDER BY version")
		require.NoError(t, err)
		vs, err := pgx.CollectRows(rows, pgx.RowTo[int32])
		require.NoError(t, err)
		out := make([]int, len(vs))
		for i, v := range vs {
			out[i] = int(v)
		}
		return out
	}
	allVersions := make([]int, len(all))
	for i, m := range all {
		allVersions[i] = m.Version
	}

	t.Run("flag", func(t *testing.T) {
		t.Parallel()
		url := pg.EmptyDB(t)
		code, out, errOut := cliMain("migrate", "--database-url", url)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, wantFirst, out)
		assert.Empty(t, errOut)
		assert.Equal(t, allVersions, schemaVersions(t, url))

		code, out, errOut = cliMain("migrate", "--database-url", url)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, wantAgain, out, "a second run applies nothing")
		assert.Equal(t, allVersions, schemaVersions(t, url))
	})

	t.Run("env", func(t *testing.T) {
		t.Parallel()
		url := pg.EmptyDB(t)
		code, out, errOut := runCLI(t, []string{"PGRELAY_DATABASE_URL=" + url}, "migrate")
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, wantFirst, out)
		assert.Equal(t, allVersions, schemaVersions(t, url))

		// The command line wins over the environment.
		other := pg.EmptyDB(t)
		code, out, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL=" + closedPortURL(t)},
			"migrate", "--database-url", other)
		require.Equal(t, 0, code, errOut)
		assert.Equal(t, wantFirst, out)
		assert.Equal(t, allVersions, schemaVersions(t, other))
	})

	t.Run("concurrent", func(t *testing.T) {
		t.Parallel()
		url := pg.EmptyDB(t)
		const n = 4
		outs := make([]string, n)
		codes := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				codes[i], outs[i], _ = cliMain("migrate", "--database-url", url)
			}()
		}
		wg.Wait()
		first := 0
		for i := range n {
			assert.Equal(t, 0, codes[i], outs[i])
			switch outs[i] {
			case wantFirst:
				first++
			case wantAgain:
			default:
				t.Errorf("unexpected output %q", outs[i])
			}
		}
		assert.Equal(t, 1, first, "exactly one process applies the migrations")
		assert.Equal(t, allVersions, schemaVersions(t, url))
	})

	t.Run("no database url", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := cliMain("migrate")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "--database-url (or PGRELAY_DATABASE_URL) is required")
	})

	t.Run("cannot connect", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := cliMain("migrate", "--database-url", closedPortURL(t))
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Len(t, lines(errOut), 1, errOut)
		assert.Contains(t, errOut, "pgrelay migrate: cannot connect to the database")
		assert.NotContains(t, errOut, "s3cret")
	})
}

func TestRunErrors(t *testing.T) {
	t.Parallel()

	// A wrong URL: exit 1, one line on stderr that says why, never the password.
	for name, url := range map[string]string{
		"closed port":  closedPortURL(t),
		"bad port":     "postgres://postgres:s3cret@127.0.0.1:notaport/db",
		"not a url":    "not a url",
		"bad sslmode":  "postgres://postgres:s3cret@127.0.0.1:5432/db?sslmode=bogus",
		"missing host": "postgres://postgres:s3cret@[::1/db",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := cliMain("run", "--database-url", url)
			assert.Equal(t, 1, code)
			assert.Empty(t, out)
			assert.Len(t, lines(errOut), 1, errOut)
			assert.True(t, strings.HasPrefix(errOut, "pgrelay run: cannot connect to the database"), errOut)
			assert.NotContains(t, errOut, "s3cret")
		})
	}

	t.Run("no database url", func(t *testing.T) {
		t.Parallel()
		code, out, errOut := cliMain("run")
		assert.Equal(t, 2, code)
		assert.Empty(t, out)
		assert.Equal(t, "pgrelay run: --database-url (or PGRELAY_DATABASE_URL) is required\n", errOut)
	})

	t.Run("unmigrated database", func(t *testing.T) {
		t.Parallel()
		url := pg.EmptyDB(t)
		code, out, errOut := cliMain("run", "--database-url", url)
		assert.Equal(t, 1, code)
		assert.Empty(t, out)
		assert.Len(t, lines(errOut), 1, errOut)
		assert.Contains(t, errOut, "run 'pgrelay migrate'")
		assert.Contains(t, errOut, "version 0")
	})

	// Bad values are usage errors (exit 2), found before connecting: the URL
	// points nowhere, which would be exit 1.
	nowhere := closedPortURL(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-id", "5000"}, "--node-id 5000: expected 0..1023"},
		{[]string{"--node-id", "-2"}, "--node-id -2: expected 0..1023"},
		{[]string{"--concurrency", "0"}, "--concurrency must be at least 1"},
		{[]string{"--batch-size", "0"}, "--batch-size must be at least 1"},
		{[]string{"--log-level", "nope"}, `--log-level "nope"`},
		{[]string{"--log-format", "xml"}, `--log-format "xml"`},
		{[]string{"--heartbeat-interval", "0s"}, "--heartbeat-interval must be positive"},
		{[]string{"--shutdown-timeout", "-1s"}, "--shutdown-timeout must be positive"},
		{[]string{"--dead-after", "-1s"}, "must not be negative"},
		{[]string{"--dead-letter-retention", "0s"}, "--dead-letter-retention must be positive"},
		{[]string{"--dead-letter-retention", "-24h"}, "--dead-letter-retention must be positive"},
		{[]string{"--heartbeat-interval", "2s", "--dead-after", "1s"}, "dead-after (1s) must be longer than the heartbeat interval (2s)"},
		{[]string{"--mode", "sideways"}, `--mode "sideways": unknown mode`},
		{[]string{"--concurrency", "many"}, `invalid value "many" for flag -concurrency`},
		{[]string{"--poll-interval", "7"}, `invalid value "7" for flag -poll-interval`},
		{[]string{"extra"}, `unexpected argument "extra"`},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			args := append([]string{"run", "--database-url", nowhere}, tc.args...)
			code, out, errOut := cliMain(args...)
			assert.Equal(t, 2, code, errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.want)
			assert.NotContains(t, errOut, "cannot connect")
		})
	}

	// Environment fallbacks are validated like flags.
	t.Run("env", func(t *testing.T) {
		t.Parallel()
		code, _, errOut := runCLI(t, []string{"PGRELAY_DATABASE_URL=" + nowhere, "PGRELAY_CONCURRENCY=0"}, "run")
		assert.Equal(t, 2, code, errOut)
		assert.Contains(t, errOut, "--concurrency must be at least 1")

		code, _, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL=" + nowhere, "PGRELAY_NODE_ID=x"}, "run")
		assert.Equal(t, 2, code, errOut)
		assert.Contains(t, errOut, `PGRELAY_NODE_ID="x"`)

		// With the URL from the environment, run gets as far as connecting.
		code, _, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL=" + nowhere}, "run")
		assert.Equal(t, 1, code, errOut)
		assert.Len(t, lines(errOut), 1, errOut)
		assert.Contains(t, errOut, "cannot connect to the database")
	})
}

// nodes decommission refuses a --dead-after that is not positive as a usage
// error, before connecting: a live node would count as silent long enough.
func TestDecommissionDeadAfterUsage(t *testing.T) {
	t.Parallel()
	nowhere := closedPortURL(t)
	for _, v := range []string{"0s", "-1s", "-1h0m0s"} {
		code, out, errOut := cliMain("nodes", "decommission", "3", "--yes", "--database-url", nowhere, "--dead-after", v)
		assert.Equal(t, 2, code, errOut)
		assert.Empty(t, out)
		assert.Contains(t, errOut, "--dead-after "+v+": must be positive", v)
		assert.NotContains(t, errOut, "cannot connect")
	}
}

// statsRow is one parsed data row of `pgrelay stats`.
type statsRow struct {
	kind, mode                                       string
	priority, pending, restricted, inFlight, retries int
	limit, rate                                      string
	oldest                                           string
}

// parseStats parses the table `pgrelay stats` prints, keyed by channel (with
// " (paused)" kept in the name). The table's rows are the lines as wide as
// its header (its cells are padded, right-aligned); the lines under it
// (the Processors, schedules, …) are not.
func parseStats(t *testing.T, out string) map[string]statsRow {
	t.Helper()
	ls := lines(out)
	require.NotEmpty(t, ls)
	assert.Equal(t, []string{"CHANNEL", "KIND", "MODE", "PRIORITY", "PENDING", "RESTRICTED", "IN", "FLIGHT",
		"RETRYING", "LIMIT", "RATE", "OLDEST", "PENDING"}, strings.Fields(ls[0]))
	rows := map[string]statsRow{}
	for _, l := range ls[1:] {
		if len(l) != len(ls[0]) {
			break
		}
		f := strings.Fields(l)
		name := f[0]
		if len(f) > 1 && f[1] == "(paused)" {
			name += " " + f[1]
			f = append(f[:1], f[2:]...)
		}
		require.GreaterOrEqual(t, len(f), 11, "stats row %q", l)
		var r statsRow
		r.kind, r.mode = f[1], f[2]
		for i, p := range []*int{&r.priority, &r.pending, &r.restricted, &r.inFlight, &r.retries} {
			n, err := strconv.Atoi(f[3+i])
			require.NoError(t, err, "stats row %q", l)
			*p = n
		}
		r.limit, r.rate = f[8], f[9]
		r.oldest = strings.Join(f[10:], " ")
		rows[name] = r
	}
	return rows
}

func TestStats(t *testing.T) {
	t.Parallel()
	d := newDB(t)

	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Contains(t, out, "(no channels registered)")

	d.Exec(`SELECT pgrelay.register('c1', 'SELECT 1 WHERE $1::text IS NOT NULL')`)
	d.Exec(`SELECT pgrelay.register('c2', 'SELECT 1 WHERE $1::text IS NOT NULL', p_concurrency_mode := 'channel')`)
	d.Exec(`SELECT pgrelay.register('c3', 'SELECT 1 WHERE $1::text IS NOT NULL', p_priority := -2,
		p_max_in_flight := 4, p_rate_limit := 50, p_rate_period := '1 minute')`)
	for i := range 4 {
		d.Exec(`SELECT pgrelay.notify('c1', $1)`, fmt.Sprint("x", i))
	}
	d.Exec(`SELECT pgrelay.notify('c2', 'y')`)
	d.Exec(`SELECT pgrelay.update('c3', p_paused := true)`)
	d.Exec(`SELECT pgrelay.notify('c3', 'z')`) // accepted while paused: it waits
	// One c1 event in flight, one a pending retry.
	d.Exec(`UPDATE pgrelay.queue SET dispatched_at = now(), dispatched_by = 1
	         WHERE id = (SELECT min(id) FROM pgrelay.queue WHERE channel = 'c1')`)
	d.Exec(`UPDATE pgrelay.queue SET attempt = 2
	         WHERE id = (SELECT max(id) FROM pgrelay.queue WHERE channel = 'c1')`)

	code, out, errOut = cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Empty(t, errOut)
	rows := parseStats(t, out)
	assert.Len(t, rows, 3, out)
	assert.Equal(t, statsRow{kind: "sql", mode: "none", pending: 3, inFlight: 1, retries: 1, limit: "-", rate: "-",
		oldest: rows["c1"].oldest}, rows["c1"])
	assert.Equal(t, statsRow{kind: "sql", mode: "channel", pending: 1, limit: "-", rate: "-", oldest: rows["c2"].oldest}, rows["c2"])
	assert.Equal(t, statsRow{kind: "sql", mode: "none", priority: -2, pending: 1, limit: "4", rate: "50/1m0s",
		oldest: rows["c3 (paused)"].oldest}, rows["c3 (paused)"])
	for name, r := range rows {
		assert.Regexp(t, `^\d+s ago$`, r.oldest, name)
	}

	// The environment fallback.
	code, out, errOut = runCLI(t, []string{"PGRELAY_DATABASE_URL=" + d.URL}, "stats")
	require.Equal(t, 0, code, errOut)
	assert.Equal(t, 3, parseStats(t, out)["c1"].pending)

	t.Run("errors", func(t *testing.T) {
		code, _, errOut := cliMain("stats")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "--database-url (or PGRELAY_DATABASE_URL) is required")

		code, _, errOut = cliMain("stats", "--database-url", closedPortURL(t))
		assert.Equal(t, 1, code)
		assert.Len(t, lines(errOut), 1, errOut)
		assert.Contains(t, errOut, "pgrelay stats: cannot connect to the database")

		code, _, errOut = cliMain("stats", "--database-url", pg.EmptyDB(t))
		assert.Equal(t, 1, code)
		assert.Len(t, lines(errOut), 1, errOut)
		assert.Contains(t, errOut, "run 'pgrelay migrate'")
	})
}
