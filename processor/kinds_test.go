package processor_test

import (
	"context"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/internal/version"
	"github.com/pgrelay/pgrelay/processor"
)

// kindsDB is goDB with a go channel (handler "ship") and a sql channel,
// whose statement writes app.shipments, and an event enqueued on each
// before any Processor starts: the sql one first.
func kindsDB(t *testing.T) (d *testenv.DB, sqlID, goID int64) {
	t.Helper()
	d = goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	d.Exec(`SELECT pgrelay.register('refresh', 'INSERT INTO app.shipments (origin_id, attempt) SELECT $1::bigint, 0')`)
	sqlID = notify(t, d, "refresh", "42")
	goID = notify(t, d, "ship", "order 1")
	return d, sqlID, goID
}

func shipNothing(p *processor.Processor) {
	p.Handle("ship", func(context.Context, pgrelay.Event) error { return nil })
}

// By default an embedded Processor claims the go channels of its handlers
// only: a sql channel's events stay pending for `pgrelay run`, though they
// were ready before the go event that it ran.
func TestProcessorLeavesSQLChannelsByDefault(t *testing.T) {
	t.Parallel()
	d, sqlID, goID := kindsDB(t)
	p, err := processor.NewProcessor(goConfig(d.URL))
	require.NoError(t, err)
	shipNothing(p)
	require.NoError(t, p.Start(context.Background()))
	waitEnded(t, d, goID)
	// Stop waits for every batch and writes every outcome: whatever the
	// Processor had taken of the sql channel would show now.
	require.NoError(t, p.Stop(context.Background()))
	require.Empty(t, logEvents(t, d, sqlID), "the embedded Processor must not run the sql event")
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1 AND dispatched_by IS NULL", sqlID),
		"the sql event is still pending, unclaimed")
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments"))
}

// With KindSQL in Config.Kinds it runs them too.
func TestProcessorRunsSQLChannelsWithKindSQL(t *testing.T) {
	t.Parallel()
	d, sqlID, goID := kindsDB(t)
	cfg := goConfig(d.URL)
	cfg.Kinds = []string{processor.KindSQL}
	p, err := processor.NewProcessor(cfg)
	require.NoError(t, err)
	shipNothing(p)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	waitEnded(t, d, goID)
	waitEnded(t, d, sqlID)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, sqlID))
	require.Equal(t, []int64{42}, testenv.Column[int64](t, d.Pool, "SELECT origin_id FROM app.shipments"))
}

// An embedded Processor shows in pgrelay.processors as `pgrelay run` does:
// its node, host, process and the release of the source it links.
func TestProcessorRegistersItsVersionAndNode(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	p := startGo(t, d.URL, shipNothing)
	require.Equal(t, version.Release, d.Text("SELECT version FROM pgrelay.processors WHERE processor_id = $1", p.ID()))
	require.Equal(t, d.Text("SELECT pgrelay._this_node()::text"),
		d.Text("SELECT node_id::text FROM pgrelay.processors WHERE processor_id = $1", p.ID()))
	require.NotEmpty(t, d.Text("SELECT hostname FROM pgrelay.processors WHERE processor_id = $1", p.ID()))
}

// Config.Kinds is checked when the Processor is made; a Processor with
// nothing to run does not start.
func TestProcessorKindsAreChecked(t *testing.T) {
	t.Parallel()
	url := "postgres://localhost/none"
	for _, tc := range []struct {
		name string
		cfg  processor.Config
		want string
	}{
		{"unknown kind", processor.Config{DatabaseURL: url, Kinds: []string{"ftp"}}, `"ftp": unknown kind`},
		{"email without SMTP", processor.Config{DatabaseURL: url, Kinds: []string{processor.KindEmail}}, "no SMTP server"},
		{"SMTP without email", processor.Config{DatabaseURL: url, SMTPURL: "smtp://localhost:25"}, "has no email"},
		{"nats without NATS", processor.Config{DatabaseURL: url, Kinds: []string{processor.KindNATS}}, "no NATS server"},
		{"go", processor.Config{DatabaseURL: url, Kinds: []string{"go"}}, "go channels run with the Go handlers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := processor.NewProcessor(tc.cfg)
			require.ErrorContains(t, err, tc.want)
		})
	}
	p, err := processor.NewProcessor(processor.Config{DatabaseURL: url})
	require.NoError(t, err)
	require.ErrorContains(t, p.Start(context.Background()), "nothing to run")
}

// processor.Config holds every setting of the Processor (actors.Config)
// but those the package fills in itself, and NATSConfig every NATS
// setting, and the modes are the Processor's: a setting added to one is
// added to the other.
func TestConfigHoldsEverySetting(t *testing.T) {
	t.Parallel()
	own := map[string]bool{"Handlers": true, "GoHandlers": true, "Version": true}
	require.Equal(t, exported(reflect.TypeFor[actors.Config](), own), exported(reflect.TypeFor[processor.Config](), nil))
	require.Equal(t, exported(reflect.TypeFor[actors.NATSConfig](), nil), exported(reflect.TypeFor[processor.NATSConfig](), nil))
	require.Equal(t, []string{actors.ModeSingle, actors.ModeMultiNode, actors.ModeLeader},
		[]string{processor.ModeSingle, processor.ModeMultiNode, processor.ModeLeader})
}

func exported(t reflect.Type, skip map[string]bool) []string {
	var names []string
	for f := range t.Fields() {
		if f.IsExported() && !skip[f.Name] {
			names = append(names, f.Name+" "+strings.ReplaceAll(f.Type.String(), "actors.", "processor."))
		}
	}
	slices.Sort(names)
	return names
}
