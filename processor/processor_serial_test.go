package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/processor"
)

// The next event of a serialised channel or lane is claimed as soon as the
// one before it has ended, whichever way its outcome is written (by the
// completer for Handle, in the handler's own transaction for HandleTx and
// HandleTxBatch): with the fallback poll at an hour, 500 events run, in
// order, within a wait that only the poll could otherwise end.
func TestGoSerialModesClaimTheNextEventWithoutThePoll(t *testing.T) {
	t.Parallel()
	type kind struct {
		name     string
		register func(p *processor.Processor, note func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error)
	}
	kinds := []kind{
		{"Handle", func(p *processor.Processor, note func(context.Context, pgx.Tx, pgrelay.Event) error) {
			p.Handle("post", func(ctx context.Context, ev pgrelay.Event) error { return note(ctx, nil, ev) })
		}},
		{"HandleTx", func(p *processor.Processor, note func(context.Context, pgx.Tx, pgrelay.Event) error) {
			p.HandleTx("post", note)
		}},
		{"HandleTxBatch", func(p *processor.Processor, note func(context.Context, pgx.Tx, pgrelay.Event) error) {
			p.HandleTxBatch("post", func(ctx context.Context, tx pgx.Tx, evs []pgrelay.Event) error {
				for _, ev := range evs {
					if err := note(ctx, tx, ev); err != nil {
						return err
					}
				}
				return nil
			})
		}},
	}
	for _, k := range kinds {
		for _, mode := range []string{"channel", "payload"} {
			t.Run(k.name+"/"+mode, func(t *testing.T) {
				t.Parallel()
				d := goDB(t)
				d.Exec("SELECT pgrelay.register('ledger', 'post', p_kind := 'go', p_concurrency_mode := $1)", mode)
				var mu sync.Mutex
				order := map[string][]int64{} // origin ids by lane, in the order they ran
				running := map[string]int{}
				most := 0
				note := func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
					lane := ev.Payload
					if mode == "channel" {
						lane = ""
					}
					mu.Lock()
					running[lane]++
					most = max(most, running[lane])
					order[lane] = append(order[lane], ev.OriginID)
					mu.Unlock()
					defer func() {
						mu.Lock()
						running[lane]--
						mu.Unlock()
					}()
					if tx == nil {
						return nil
					}
					_, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt)
					return err
				}
				cfg := goConfig(d.URL)
				cfg.PollInterval = time.Hour // only the end of an event can start the next
				p, err := processor.NewProcessor(cfg)
				require.NoError(t, err)
				k.register(p, note)
				require.NoError(t, p.Start(context.Background()))
				t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })

				const n = 500
				payloads := make([]string, n)
				for i := range payloads {
					payloads[i] = fmt.Sprintf("account %d", i%5)
				}
				_, err = pgrelay.NotifyMany(context.Background(), d.Pool, "ledger", payloads)
				require.NoError(t, err)
				// A bound far below the poll, far above what 500 events need.
				testenv.Eventually(t, 3*time.Minute, "every event to run", func() bool {
					return d.Count("SELECT count(*) FROM pgrelay.log WHERE channel = 'ledger' AND event = 'succeeded'") == n
				})
				if k.name != "Handle" {
					require.Equal(t, n, d.Count("SELECT count(*) FROM app.shipments"))
				}
				mu.Lock()
				defer mu.Unlock()
				require.Equal(t, 1, most, "one event at a time per lane")
				total := 0
				for lane, ids := range order {
					require.IsIncreasing(t, ids, "lane %q: in the order enqueued", lane)
					total += len(ids)
				}
				require.Equal(t, n, total, "each event ran once")
			})
		}
	}
}
