package pgrelay_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// runnableMarker precedes each SQL block of docs/user-guide.md that runs as
// written, alone, on a fresh pgrelay database.
const runnableMarker = "<!-- runnable -->"

// userGuideRunnable are the sections of docs/user-guide.md that must each
// show a runnable SQL example; Snooze, a Go handler's, points to docs/go.md
// instead, whose blocks TestGoDocBuilds builds.
var userGuideRunnable = []string{
	"### Priorities",
	"### Periodic events",
	"### Concurrency and rate limits",
	"### Unique keys over a period",
	"### Cancel an event",
}

// guideBlock is a runnable SQL block and the heading of its section.
type guideBlock struct {
	section string
	line    int
	sql     string
}

// userGuideBlocks reads the runnable blocks of a page: a marker line, then
// a ```sql block.
func userGuideBlocks(t *testing.T, doc string) []guideBlock {
	t.Helper()
	var out []guideBlock
	lines := strings.Split(doc, "\n")
	section := ""
	for i := 0; i < len(lines); i++ {
		if strings.HasPrefix(lines[i], "#") {
			section = lines[i]
		}
		if lines[i] != runnableMarker {
			continue
		}
		require.Less(t, i+1, len(lines), "line %d: a marker at the end", i+1)
		require.Equal(t, "```sql", lines[i+1], "line %d: a %s marker is followed by a ```sql block", i+1, runnableMarker)
		start := i + 2
		end := start
		for end < len(lines) && lines[end] != "```" {
			end++
		}
		require.Less(t, end, len(lines), "line %d: the block is not closed", i+2)
		out = append(out, guideBlock{section: section, line: i + 2, sql: strings.Join(lines[start:end], "\n")})
		i = end
	}
	return out
}

// The runnable examples of docs/user-guide.md's feature sections run, each
// on a fresh database as an admin, statement by statement as psql runs a
// file (each statement its own transaction): each makes what it uses (a
// table, the channel) and takes the ids it needs from notify() itself. A
// statement whose line ends with a result the test knows (userGuideResults)
// returns it.
//
// The page's convention: a block that must run is preceded by the line
// runnableMarker, and the comment after a statement's semicolon on its
// last line states its result when it is one of userGuideResults.
func TestUserGuideExamplesRun(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("docs", "user-guide.md"))
	require.NoError(t, err)
	doc := string(b)
	blocks := userGuideBlocks(t, doc)
	for _, section := range userGuideRunnable {
		found := false
		for _, blk := range blocks {
			found = found || blk.section == section
		}
		require.True(t, found, "docs/user-guide.md's section %q has a runnable SQL example (%s before its ```sql)",
			section, runnableMarker)
	}
	snooze := doc[strings.Index(doc, "### Snooze"):]
	snooze = snooze[:strings.Index(snooze[1:], "\n#")+1]
	require.Contains(t, snooze, "(go.md#the-same-service-in-both)", "Snooze points to docs/go.md's built example")
	require.Regexp(t, regexp.MustCompile(`(?m)^### The same service in both$`), mustRead(t, filepath.Join("docs", "go.md")))

	for _, blk := range blocks {
		t.Run(fmt.Sprintf("line%d", blk.line), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := newDB(t)
			conn, err := d.admin.Acquire(ctx)
			require.NoError(t, err)
			defer conn.Release()
			require.NotRegexp(t, `\b[0-9]{15,}\b`, blk.sql, "an example makes its ids (an event's id of another database means nothing)")
			stmts := splitSQL(blk.sql)
			require.NotEmpty(t, stmts)
			previous := ""
			for _, stmt := range stmts {
				// The simple protocol, as psql: one statement, its own transaction.
				results, err := conn.Conn().PgConn().Exec(ctx, stmt.sql).ReadAll()
				require.NoError(t, err, "docs/user-guide.md, %s, the block at line %d:\n%s", blk.section, blk.line, stmt.sql)
				value := ""
				if len(results) == 1 && len(results[0].Rows) == 1 {
					row := results[0].Rows[0]
					value = string(row[len(row)-1])
				}
				if want, ok := userGuideResults[stmt.result]; ok {
					if want == "" {
						want = previous
					}
					require.Equal(t, want, value, "docs/user-guide.md, %s: the result of\n%s", blk.section, stmt.sql)
				}
				previous = value
			}
		})
	}
}

// userGuideResults are the results a runnable statement's comment may state,
// and the value (of the last column of its one row) that says it; "" for
// the value of the statement before.
var userGuideResults = map[string]string{
	"true":        "t",
	"cancelled":   "cancelled",
	"the same id": "",
}

// sqlStatement is a statement of a script, and the comment that follows its
// semicolon on the same line, if any.
type sqlStatement struct{ sql, result string }

// splitSQL splits a script into its statements at the semicolons outside
// quotes, quoted identifiers, dollar quotes and comments; a statement of
// comments alone is dropped.
func splitSQL(script string) []sqlStatement {
	var out []sqlStatement
	start, i := 0, 0
	code := false // the current statement has more than comments and space
	flush := func(end int) {
		if code {
			stmt := sqlStatement{sql: strings.TrimSpace(script[start:end])}
			line, _, _ := strings.Cut(script[end:], "\n")
			if c, ok := strings.CutPrefix(strings.TrimSpace(line), "--"); ok {
				stmt.result = strings.TrimSpace(c)
			}
			out = append(out, stmt)
		}
		start, code = end, false
	}
	dollar := regexp.MustCompile(`^\$([A-Za-z_][A-Za-z_0-9]*)?\$`)
	for i < len(script) {
		rest := script[i:]
		switch {
		case strings.HasPrefix(rest, "--"):
			n := strings.IndexByte(rest, '\n')
			if n < 0 {
				n = len(rest)
			}
			i += n
		case strings.HasPrefix(rest, "/*"):
			n := strings.Index(rest, "*/")
			if n < 0 {
				n = len(rest) - 2
			}
			i += n + 2
		case rest[0] == '\'' || rest[0] == '"':
			q := rest[0]
			j := 1
			for j < len(rest) {
				if rest[j] == q {
					if j+1 < len(rest) && rest[j+1] == q { // a doubled quote
						j += 2
						continue
					}
					break
				}
				j++
			}
			i += j + 1
			code = true
		case dollar.MatchString(rest):
			tag := dollar.FindString(rest)
			n := strings.Index(rest[len(tag):], tag)
			if n < 0 {
				n = len(rest) - 2*len(tag)
			}
			i += len(tag) + n + len(tag)
			code = true
		case rest[0] == ';':
			i++
			flush(i)
		default:
			if rest[0] != ' ' && rest[0] != '\n' && rest[0] != '\t' && rest[0] != '\r' {
				code = true
			}
			i++
		}
	}
	flush(len(script))
	return out
}
