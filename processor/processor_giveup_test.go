package processor_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/processor"
)

// Whether a failed attempt gives up is decided where it is recorded, by the
// channel's max_attempts then: an update() of max_attempts while the attempt
// runs changes what the log records, and the metrics count what the log
// records, whichever way the outcome is written (the completer for Handle,
// a direct batch for a 'none' HandleTx or sql channel).
func TestGiveUpIsDecidedWhereItIsRecorded(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		kind     string // "handle", "tx" (a 'none' HandleTx channel: direct batches) or "sql"
		from, to int
	}{
		{"Handle raised", "handle", 1, 3},
		{"Handle lowered", "handle", 3, 1},
		{"HandleTx raised", "tx", 1, 3},
		{"HandleTx lowered", "tx", 3, 1},
		{"sql raised", "sql", 1, 3},
		{"sql lowered", "sql", 3, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := goDB(t)
			// The sql handler waits for the test's advisory lock, then fails.
			d.Exec(`CREATE FUNCTION app.wait_then_fail(p text) RETURNS void LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_advisory_xact_lock(7); RAISE EXCEPTION 'boom %', p; END $$`)
			handler := "fail"
			kind := "go"
			if tc.kind == "sql" {
				handler, kind = "SELECT app.wait_then_fail($1)", "sql"
			}
			// No retry runs during the test.
			d.Exec(`SELECT pgrelay.register('ch', $1, p_kind := $2, p_max_attempts := $3, p_retry_delay := '1 hour')`,
				handler, kind, tc.from)

			started, release := make(chan struct{}, 1), make(chan struct{})
			wait := func(ctx context.Context) error {
				select {
				case started <- struct{}{}:
				default:
				}
				select {
				case <-release:
				case <-ctx.Done():
					return ctx.Err()
				}
				return errors.New("boom")
			}
			cfg := goConfig(d.URL)
			reg := prometheus.NewRegistry()
			cfg.Registerer = reg
			if tc.kind == "sql" {
				cfg.Kinds = []string{processor.KindSQL}
			}
			p, err := processor.NewProcessor(cfg)
			require.NoError(t, err)
			switch tc.kind {
			case "handle":
				p.Handle("fail", func(ctx context.Context, _ pgrelay.Event) error { return wait(ctx) })
			case "tx":
				p.HandleTx("fail", func(ctx context.Context, _ pgx.Tx, _ pgrelay.Event) error { return wait(ctx) })
			default:
				p.Handle("unused", func(context.Context, pgrelay.Event) error { return nil })
			}
			var lock *pgx.Conn
			if tc.kind == "sql" {
				lock, err = pgx.Connect(ctx, d.URL)
				require.NoError(t, err)
				t.Cleanup(func() { _ = lock.Close(context.Background()) })
				_, err = lock.Exec(ctx, "SELECT pg_advisory_lock(7)")
				require.NoError(t, err)
			}
			require.NoError(t, p.Start(ctx))
			t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })

			id := notify(t, d, "ch", "x")
			if tc.kind == "sql" {
				testenv.Eventually(t, 30*time.Second, "the handler to wait for the lock", func() bool {
					return d.Count("SELECT count(*) FROM pg_catalog.pg_locks WHERE locktype = 'advisory' AND NOT granted") > 0
				})
			} else {
				select {
				case <-started:
				case <-time.After(30 * time.Second):
					t.Fatal("the handler did not run")
				}
			}
			// Mid-flight: the event was claimed with max_attempts tc.from.
			d.Exec("SELECT pgrelay.update('ch', p_max_attempts := $1)", tc.to)
			if tc.kind == "sql" {
				_, err = lock.Exec(ctx, "SELECT pg_advisory_unlock(7)")
				require.NoError(t, err)
			} else {
				close(release)
			}

			testenv.Eventually(t, 30*time.Second, "the attempt to be recorded", func() bool {
				return d.Count("SELECT count(*) FROM pgrelay.log WHERE origin_id = $1", id) > 0
			})
			want := "failed" // attempt 1 of tc.to
			if tc.to == 1 {
				want = "gave_up"
			}
			require.Equal(t, []string{want}, logEvents(t, d, id), "the channel's max_attempts when recorded decides")
			// A counter not yet counted is not there: 0.
			metric := func(name string) float64 {
				families, err := reg.Gather()
				require.NoError(t, err)
				for _, f := range families {
					for _, m := range f.GetMetric() {
						if f.GetName() == "pgrelay_"+name+"_total" && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == "ch" {
							return m.GetCounter().GetValue()
						}
					}
				}
				return 0
			}
			testenv.Eventually(t, 30*time.Second, "the metrics to count the attempt", func() bool {
				return metric("failed")+metric("gave_up") > 0
			})
			for _, ev := range []string{"failed", "gave_up"} {
				require.Equal(t, float64(d.Count("SELECT count(*) FROM pgrelay.log WHERE channel = 'ch' AND event = $1", ev)),
					metric(ev), fmt.Sprintf("pgrelay_%s_total says what the log says", ev))
			}
		})
	}
}
