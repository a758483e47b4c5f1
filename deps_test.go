package pgrelay_test

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// producerModules are the only modules a program that only enqueues may
// link besides the standard library: pgrelay, pgx with its own, and the
// OpenTelemetry API with its own (the producer span of Notify; no SDK, no
// exporter).
var producerModules = map[string]bool{
	"go.opentelemetry.io/otel":       true,
	"go.opentelemetry.io/otel/trace": true,
	"github.com/cespare/xxhash/v2":   true, // the OTel API's attribute hashing
	"github.com/pgrelay/pgrelay":     true,
	"github.com/jackc/pgx/v5":        true,
	"github.com/jackc/pgpassfile":    true,
	"github.com/jackc/pgservicefile": true,
	"github.com/jackc/puddle/v2":     true,
	"golang.org/x/text":              true,
	"golang.org/x/sync":              true,
}

// A program that calls Notify, NotifyMany, Status, Cancel, Send and ParseEvent
// (testdata/producer) links pgx, the OpenTelemetry API and the standard
// library: not the actor library, NATS, SMTP, Prometheus or an OpenTelemetry
// SDK, which only the processor package and cmd/pgrelay need. So does the
// root package itself.
func TestProducerLinks(t *testing.T) {
	t.Parallel()
	goCmd, err := exec.LookPath("go")
	require.NoError(t, err, "the go command reads what a program links")
	build := exec.Command(goCmd, "build", "-o", os.DevNull, "./testdata/producer")
	out, err := build.CombinedOutput()
	require.NoError(t, err, "testdata/producer must build: %s", out)
	for _, pkg := range []string{"./testdata/producer", "."} {
		out, err := exec.Command(goCmd, "list", "-deps", "-f", "{{with .Module}}{{.Path}}{{end}}", pkg).Output()
		require.NoError(t, err, "go list -deps %s", pkg)
		extra := map[string]bool{}
		for _, m := range strings.Fields(string(out)) {
			if !producerModules[m] {
				extra[m] = true
			}
		}
		require.Empty(t, slices.Sorted(maps.Keys(extra)), "%s links modules a producer does not need", pkg)
	}
}
