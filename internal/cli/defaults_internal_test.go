package cli

import (
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/migrations"
)

// The Processor's defaults are set once (actors.Defaults): `pgrelay run`'s
// flags default to them, and docs/reference.md says the same.
func TestRunFlagDefaultsAreTheProcessorsAndDocumented(t *testing.T) {
	t.Parallel()
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f processorFlags
	f.register(fs, true)
	require.NoError(t, fs.Parse([]string{"--database-url", "postgres://x/y"}))

	// The flags as given by default are the Processor's defaults.
	got := f.config(nil, nil).WithDefaults()
	def := actors.Defaults()
	require.NotNil(t, got.NATS)
	require.Equal(t, *def.NATS, actors.NATSConfig{Stream: got.NATS.Stream, PublishBatch: got.NATS.PublishBatch,
		PublishInterval: got.NATS.PublishInterval})
	got.DatabaseURL, got.Logger, got.NATS, def.NATS = "", nil, nil, nil
	require.Equal(t, def, got)

	// docs/reference.md's `pgrelay run` table: each flag's default as a
	// row's first cell names it, or as "`--flag` (`value`)" in the text.
	doc, err := os.ReadFile("../../docs/reference.md")
	require.NoError(t, err)
	section := string(doc)
	section = section[strings.Index(section, "### `pgrelay run`"):]
	section = section[:strings.Index(section[1:], "\n### ")+1]
	documented := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `(--[a-z-]+)` \\| `([^`]+)`").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = m[2]
	}
	for _, m := range regexp.MustCompile("`(--[a-z-]+)` \\(`([^`]+)`\\)").FindAllStringSubmatch(section, -1) {
		documented[m[1]] = m[2]
	}
	checked := 0
	fs.VisitAll(func(fl *flag.Flag) {
		doc, ok := documented["--"+fl.Name]
		if !ok {
			return
		}
		checked++
		if want, err := time.ParseDuration(fl.DefValue); err == nil {
			d, err := time.ParseDuration(doc)
			require.NoError(t, err, "--%s: documented default %q", fl.Name, doc)
			require.Equal(t, want, d, "--%s: documented default %q", fl.Name, doc)
			return
		}
		require.Equal(t, fl.DefValue, doc, "--%s: documented default", fl.Name)
	})
	for _, name := range []string{"mode", "concurrency", "max-connections", "batch-size", "sql-batch", "poll-interval",
		"heartbeat-interval", "dead-after", "leader-settle", "lease-grace", "shutdown-timeout", "log-retention",
		"log-retention-unpublished", "dead-letter-retention", "nats-publish-batch", "nats-publish-interval"} {
		require.Contains(t, documented, "--"+name, "docs/reference.md gives --%s's default", name)
	}
	require.GreaterOrEqual(t, checked, 16)
}

// migrate counts a Processor stopped after the Processors' own --dead-after
// default (actors.Defaults): its flag defaults to it, docs/reference.md
// gives it, and migrations.DefaultProcessorDeadAfter (what UpWith takes when
// given none; migrations cannot import actors, which imports it) equals it.
func TestMigrateDeadAfterIsTheProcessors(t *testing.T) {
	t.Parallel()
	want := actors.Defaults().DeadAfter
	require.Equal(t, want, migrations.DefaultProcessorDeadAfter,
		"migrations.DefaultProcessorDeadAfter is the Processors' default --dead-after")

	var out, errOut strings.Builder
	require.Equal(t, 0, Main([]string{"migrate", "-h"}, &out, &errOut))
	m := regexp.MustCompile(`-dead-after duration\n[^\n]*\(default ([^)]+)\)`).FindStringSubmatch(errOut.String())
	require.NotNil(t, m, "migrate -h gives --dead-after's default:\n%s", errOut.String())
	got, err := time.ParseDuration(m[1])
	require.NoError(t, err)
	require.Equal(t, want, got, "migrate --dead-after's default")

	doc, err := os.ReadFile("../../docs/reference.md")
	require.NoError(t, err)
	section := string(doc)
	section = section[strings.Index(section, "### `pgrelay migrate`"):]
	section = section[:strings.Index(section[1:], "\n### ")+1]
	m = regexp.MustCompile("`--dead-after` \\(`([^`]+)`").FindStringSubmatch(section)
	require.NotNil(t, m, "docs/reference.md gives migrate --dead-after's default")
	got, err = time.ParseDuration(m[1])
	require.NoError(t, err, "docs/reference.md: migrate --dead-after's default %q", m[1])
	require.Equal(t, want, got, "docs/reference.md: migrate --dead-after's default")
}
