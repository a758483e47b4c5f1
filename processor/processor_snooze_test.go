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
	"github.com/pgrelay/pgrelay/processor"
)

// Snooze puts the event back without spending an attempt, on every Go
// path: Handle, HandleTx in direct batches ('none') and claimed one at a
// time ('channel'), HandleTxBatch. What a transactional handler wrote before
// it snoozed rolls back. The log reads snoozed, then succeeded, and the
// second run is attempt 1 again.
func TestGoSnoozeSpendsNoAttempt(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('plain', 'plain', p_kind := 'go', p_max_attempts := 1)")
	d.Exec("SELECT pgrelay.register('tx', 'tx', p_kind := 'go', p_max_attempts := 1)")
	d.Exec("SELECT pgrelay.register('serial', 'serial', p_kind := 'go', p_max_attempts := 1, p_concurrency_mode := 'channel')")
	d.Exec("SELECT pgrelay.register('batch', 'batch', p_kind := 'go', p_max_attempts := 1)")
	var mu sync.Mutex
	runs := map[int64][]int{} // origin id: the attempt of each run
	first := func(ev pgrelay.Event) bool {
		mu.Lock()
		defer mu.Unlock()
		runs[ev.OriginID] = append(runs[ev.OriginID], ev.Attempt)
		return len(runs[ev.OriginID]) == 1
	}
	write := func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		_, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt)
		return err
	}
	txFn := func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		if err := write(ctx, tx, ev); err != nil {
			return err
		}
		if first(ev) {
			return pgrelay.Snooze(time.Millisecond)
		}
		return nil
	}
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("plain", func(ctx context.Context, ev pgrelay.Event) error {
			if first(ev) {
				return pgrelay.Snooze(time.Millisecond)
			}
			return nil
		})
		p.HandleTx("tx", txFn)
		p.HandleTx("serial", txFn)
		p.HandleTxBatch("batch", func(ctx context.Context, tx pgx.Tx, evs []pgrelay.Event) error {
			snooze := false
			for _, ev := range evs {
				if err := write(ctx, tx, ev); err != nil {
					return err
				}
				snooze = first(ev) || snooze
			}
			if snooze {
				return pgrelay.Snooze(time.Millisecond)
			}
			return nil
		})
	})
	var ids []int64
	for _, ch := range []string{"plain", "tx", "serial", "batch"} {
		ids = append(ids, notify(t, d, ch, ch))
	}
	for _, id := range ids {
		waitEnded(t, d, id)
		require.Equal(t, []string{"snoozed", "succeeded"}, logEvents(t, d, id), "event %d", id)
		mu.Lock()
		require.Equal(t, []int{1, 1}, runs[id], "event %d: the snooze spent no attempt", id)
		mu.Unlock()
	}
	require.Equal(t, 3, d.Count("SELECT count(*) FROM app.shipments"), "the snoozed runs' writes rolled back")
	require.Zero(t, d.Count("SELECT count(*) FROM pgrelay.dead_letters"))
	for _, id := range ids {
		e := d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'snoozed'", id)
		_, err := time.Parse(time.RFC3339Nano, e[len("snoozed until "):])
		require.NoError(t, err, fmt.Sprintf("event %d: %q names when it is due", id, e))
	}
}

// Cancel ends a pending event of a Go channel; the Processor never runs it.
func TestGoCancelledEventNeverRuns(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('later', 'later', p_kind := 'go')")
	ran := make(chan int64, 10)
	ctx := context.Background()
	id, err := pgrelay.Notify(ctx, d.Pool, "later", "x", pgrelay.Delay(time.Hour))
	require.NoError(t, err)
	next := notify(t, d, "later", "y")
	ok, err := pgrelay.Cancel(ctx, d.Pool, id)
	require.NoError(t, err)
	require.True(t, ok)
	startGo(t, d.URL, func(p *processor.Processor) {
		p.Handle("later", func(ctx context.Context, ev pgrelay.Event) error {
			ran <- ev.OriginID
			return nil
		})
	})
	waitEnded(t, d, next)
	require.Equal(t, next, <-ran)
	st, err := pgrelay.Status(ctx, d.Pool, id)
	require.NoError(t, err)
	require.Equal(t, pgrelay.StatusCancelled, st)
	ok, err = pgrelay.Cancel(ctx, d.Pool, id)
	require.NoError(t, err)
	require.False(t, ok, "it has ended")
	require.Equal(t, []string{"cancelled"}, logEvents(t, d, id))
}
