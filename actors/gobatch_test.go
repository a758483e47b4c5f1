package actors_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/handlers"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// The events of a claim of a 'none' go channel whose handler takes batches
// (HandleTxBatch; those of a HandleTx handler run in direct batches, with no
// claim) wait in the channel actor for the claim's last one. Should the
// dispatcher fail on that one (its event fails, its retry an hour away),
// the others are not left waiting for it: they run and succeed.
func TestActorGoTxBatchRunsWhenTheClaimsLastEventIsLost(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_retry_delay := '1 hour')`)
	e.Exec(`SELECT pgrelay.notify_many('ship', ARRAY['a', 'b', 'crash'])`)
	var mu sync.Mutex
	txs := map[string]int64{}
	crashed := make(chan struct{}, 1)
	e.startProcessor(func(c *actors.Config) {
		c.GoHandlers = map[string]handlers.GoHandler{"ship": {
			Batch: func(ctx context.Context, tx pgx.Tx, evs []handlers.Event) error {
				var id int64
				if err := tx.QueryRow(ctx, "SELECT pg_catalog.txid_current()").Scan(&id); err != nil {
					return err
				}
				mu.Lock()
				defer mu.Unlock()
				for _, ev := range evs {
					if _, ran := txs[ev.Payload]; !ran {
						txs[ev.Payload] = id
					}
				}
				return nil
			}}}
		actors.SetTestHook(c, func(name string, msg any) {
			if p, ok := actors.DispatchPayload(msg); ok && name == "dispatcher" && p == "crash" {
				select {
				case crashed <- struct{}{}:
					panic("dispatcher bug")
				default: // crash once only
				}
			}
		})
	})
	testenv.Eventually(e.T, 20*time.Second, "a and b to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 2
	})
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'failed' AND error LIKE '%internal error: actor%dispatcher bug%'`))
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, txs, 2, "crash did not run")
}

// The direct batches of a HandleTx handler's 'none' go channel keep the
// multi-node partition, as a sql channel's do: each node runs the rows it
// owns, through its function, and none runs elsewhere.
func TestActorGoDirectMultiNodeOwnRowsOnly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, node int DEFAULT current_setting('pg_relay.node_id')::int)`)
	e.Exec(`SELECT pgrelay.register('m', 'ship', p_kind := 'go')`)
	e.enqueueOn(1, "m", payloads("one", 200))
	e.enqueueOn(2, "m", payloads("two", 200))
	ship := alive(func(c *actors.Config) {
		c.GoHandlers = map[string]handlers.GoHandler{"ship": {Tx: true,
			Fn: func(ctx context.Context, tx pgx.Tx, ev handlers.Event) error {
				_, err := tx.Exec(ctx, "INSERT INTO public.ran(payload) VALUES ($1)", ev.Payload)
				return err
			}}}
	})
	e.startNode(1, actors.ModeMultiNode, ship)
	testenv.Eventually(e.T, 30*time.Second, "node 1's rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 200
	})
	require.Equal(t, 200, e.Count(`SELECT count(*) FROM ran WHERE node = 1 AND payload LIKE 'one-%'`),
		"node 1 ran only its own rows")
	e.startNode(2, actors.ModeMultiNode, ship)
	testenv.Eventually(e.T, 30*time.Second, "node 2's rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 400
	})
	require.Equal(t, 200, e.Count(`SELECT count(*) FROM ran WHERE node = 2 AND payload LIKE 'two-%'`))
	require.Equal(t, 400, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	require.Equal(t, 400, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
}
