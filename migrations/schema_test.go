package migrations_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/migrations"
)

var update = flag.Bool("update", false, "rewrite migrations/testdata/schema.sql from a freshly migrated database")

// TestSchemaSnapshot keeps the schema reviewable. It migrates a fresh
// database and compares pg_dump --schema-only of schemas pgrelay and
// pgrelay_notifier (tables, indexes, triggers, functions with their bodies,
// owners, grants and comments) with the committed testdata/schema.sql;
// `go test ./migrations -run TestSchemaSnapshot -update` rewrites it.
//
// The migrations of release v0.1.0 are its baseline, one file per schema;
// 0003 is the upgrade to v0.2.0, and each function has its file under
// functions/ (docs/architecture.md, "The schema's files"). The diff of this
// snapshot shows in review what a change of either does to the schema.
func TestSchemaSnapshot(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	require.NoError(t, pg.Exec(ctx, "postgres", "CREATE DATABASE schema_snapshot"))
	url := pg.URL("schema_snapshot")
	c, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	defer c.Close(ctx)
	_, err = migrations.Up(ctx, c)
	require.NoError(t, err)

	got := dumpSchema(t, url)

	path := filepath.Join("testdata", "schema.sql")
	if *update {
		require.NoError(t, os.MkdirAll("testdata", 0o755))
		require.NoError(t, os.WriteFile(path, got, 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run: go test ./migrations -run TestSchemaSnapshot -update")
	if d := firstDifference(string(want), string(got)); d != "" {
		t.Fatalf("the migrated schema differs from %s:\n%s\nreview the change, then run: go test ./migrations -run TestSchemaSnapshot -update", path, d)
	}
}

// dumpSchema is pg_dump --schema-only of pgrelay's schemas in the database
// at url, without what varies between runs.
func dumpSchema(t *testing.T, url string) []byte {
	t.Helper()
	bin, err := devenv.FindPGBin("")
	require.NoError(t, err)
	out, err := exec.CommandContext(context.Background(), filepath.Join(bin, "pg_dump"), "--schema-only",
		"--schema=pgrelay", "--schema=pgrelay_notifier", "--dbname="+url).Output()
	require.NoError(t, err, "pg_dump: %s", stderrOf(err))
	return normaliseDump(out)
}

// requireSnapshot fails unless got is testdata/schema.sql.
func requireSnapshot(t *testing.T, got []byte, how string) {
	t.Helper()
	want, err := os.ReadFile(filepath.Join("testdata", "schema.sql"))
	require.NoError(t, err)
	if d := firstDifference(string(want), string(got)); d != "" {
		t.Fatalf("%s: the schema differs from testdata/schema.sql:\n%s", how, d)
	}
}

// firstDifference shows where two dumps first differ, with a few lines of
// context from each; "" when they are equal.
func firstDifference(want, got string) string {
	if want == got {
		return ""
	}
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	i := 0
	for i < len(w) && i < len(g) && w[i] == g[i] {
		i++
	}
	excerpt := func(lines []string) string {
		from, to := max(0, i-3), min(len(lines), i+8)
		return strings.Join(lines[from:to], "\n")
	}
	return fmt.Sprintf("first difference at line %d\n--- %s\n%s\n+++ migrated\n%s", i+1,
		"testdata/schema.sql", excerpt(w), excerpt(g))
}

// What varies between runs of pg_dump and says nothing of the schema: the
// server's and pg_dump's versions, and the random key of \restrict.
var dumpNoise = regexp.MustCompile(`(?m)^(-- Dumped (from database|by pg_dump) version .*|\\(un)?restrict .*)\n`)

func normaliseDump(b []byte) []byte { return dumpNoise.ReplaceAll(b, nil) }

func stderrOf(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
