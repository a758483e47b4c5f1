package processor_test

import (
	"context"
	"errors"
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

// txids records the transaction each attempt of a HandleTx handler first ran
// in.
type txids struct {
	mu sync.Mutex
	m  map[[2]int64]int64 // (origin id, attempt) -> txid
}

func (x *txids) note(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
	var id int64
	if err := tx.QueryRow(ctx, "SELECT pg_catalog.txid_current()").Scan(&id); err != nil {
		return err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.m == nil {
		x.m = map[[2]int64]int64{}
	}
	k := [2]int64{ev.OriginID, int64(ev.Attempt)}
	if _, ran := x.m[k]; !ran { // an attempt released and run again keeps its first
		x.m[k] = id
	}
	return nil
}

func (x *txids) of(origin int64, attempt int) int64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.m[[2]int64{origin, int64(attempt)}]
}

// distinct is how many transactions the first attempts ran in.
func (x *txids) distinct() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	seen := map[int64]bool{}
	for k, id := range x.m {
		if k[1] == 1 {
			seen[id] = true
		}
	}
	return len(seen)
}

// HandleTx runs the events one claim brings to a 'none' channel in one
// transaction, each under its own savepoint: a handler that fails or panics
// costs its own event one attempt and rolls back its own writes only; the
// batch's other events commit.
func TestGoHandleTxBatchFailureAndPanicCostTheirOwnAttempt(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_retry_delay := '0')")
	const n = 8 // a direct batch's first size (it measures its handlers): one batch
	payloads := make([]string, n)
	for i := range payloads {
		payloads[i] = fmt.Sprint(i)
	}
	ids, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ship", payloads)
	require.NoError(t, err)
	failing, panicking := ids[3], ids[6]
	var tx txids
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, t pgx.Tx, ev pgrelay.Event) error {
			if err := tx.note(ctx, t, ev); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
				return err
			}
			switch {
			case ev.Attempt > 1:
			case ev.OriginID == failing:
				return errors.New("carrier unavailable")
			case ev.OriginID == panicking:
				panic("nil map")
			}
			return nil
		})
	})
	for _, id := range ids {
		waitEnded(t, d, id)
	}
	require.Equal(t, 1, tx.distinct(), "the first attempts ran in one transaction")
	for _, id := range ids {
		want := []string{"succeeded"}
		if id == failing || id == panicking {
			want = []string{"failed", "succeeded"}
		}
		require.Equal(t, want, logEvents(t, d, id), "event %d", id)
	}
	require.Equal(t, "carrier unavailable", d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'failed'", failing))
	require.Equal(t, "handler panicked: nil map", d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1 AND event = 'failed'", panicking))
	require.Equal(t, n, d.Count("SELECT count(*) FROM app.shipments"), "one committed row per event")
	require.Equal(t, 2, d.Count("SELECT count(*) FROM app.shipments WHERE attempt = 2"))
	require.Equal(t, 2, d.Count("SELECT attempt FROM app.shipments WHERE origin_id = $1", failing))
	require.Equal(t, 2, d.Count("SELECT attempt FROM app.shipments WHERE origin_id = $1", panicking))
}

// A handler of a batch cut by its channel's timeout gives its own event up
// (max_attempts 1) with its write rolled back, whether it waited on its
// context or on a statement (which the server stops too), or returned nil
// once its context was done; the batch's others commit.
func TestGoHandleTxBatchTimeout(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_timeout := '300 milliseconds', p_max_attempts := 1)")
	ids, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ship", []string{"a", "wait", "b", "sleep", "c", "late"})
	require.NoError(t, err)
	var tx txids
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, t pgx.Tx, ev pgrelay.Event) error {
			if err := tx.note(ctx, t, ev); err != nil {
				return err
			}
			if _, err := t.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt); err != nil {
				return err
			}
			switch ev.Payload {
			case "wait":
				<-ctx.Done()
				return ctx.Err()
			case "sleep":
				_, err := t.Exec(ctx, "SELECT pg_catalog.pg_sleep(60) /* pgrelay batch timeout test */")
				return err
			case "late":
				<-ctx.Done()
				return nil // past its timeout: no success
			}
			return nil
		})
	})
	for _, id := range ids {
		waitEnded(t, d, id)
	}
	for i, id := range ids {
		want := []string{"succeeded"}
		if i == 1 || i == 3 || i == 5 {
			want = []string{"gave_up"}
		}
		require.Equal(t, want, logEvents(t, d, id), "event %d", id)
	}
	for _, id := range []int64{ids[1], ids[5]} {
		require.Equal(t, "handler timed out after 300ms: context deadline exceeded",
			d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", id))
	}
	require.Contains(t, d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", ids[3]), "handler timed out after 300ms")
	require.Equal(t, tx.of(ids[0], 1), tx.of(ids[2], 1), "a and b shared the transaction the first timeout rolled back to its savepoint")
	require.Equal(t, 3, d.Count("SELECT count(*) FROM app.shipments"))
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments WHERE origin_id = ANY ($1)", []int64{ids[1], ids[3], ids[5]}))
	// The statement cut by the timeout does not go on on the server.
	testenv.Eventually(t, 10*time.Second, "the timed out statement to stop", func() bool {
		return d.Count(`SELECT count(*) FROM pg_catalog.pg_stat_activity
			WHERE query LIKE '%pgrelay batch timeout test%' AND pid <> pg_catalog.pg_backend_pid()`) == 0
	})
}

// Events of a 'channel' channel keep their order and run one at a time
// across two Processors with HandleTx batches on (the default), and so do
// each payload's events of a 'payload' channel. Order and overlap are the
// committed runs' (app.ran, numbered and timed on the server as they run): a
// run whose transaction rolled back (a batch that rolled back whole, a claim
// taken back from a Processor a loaded machine kept from heartbeating) ran
// again, but committed once.
func TestGoHandleTxSerialModesKeepOrderWithBatches(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec(`CREATE TABLE app.ran (n bigint GENERATED ALWAYS AS IDENTITY, lane text NOT NULL, origin_id bigint NOT NULL,
		started_at timestamptz NOT NULL DEFAULT clock_timestamp(), ended_at timestamptz)`)
	d.Exec("SELECT pgrelay.register('ledger', 'post', p_kind := 'go', p_concurrency_mode := 'channel')")
	d.Exec("SELECT pgrelay.register('accounts', 'post', p_kind := 'go', p_concurrency_mode := 'payload')")
	handler := func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
		lane := ev.Channel + "/" + ev.Payload
		if ev.Channel == "ledger" {
			lane = ev.Channel
		}
		var n int64
		if err := tx.QueryRow(ctx, `WITH s AS (INSERT INTO app.shipments VALUES ($1, $2))
			INSERT INTO app.ran (lane, origin_id) VALUES ($3, $1) RETURNING n`, ev.OriginID, ev.Attempt, lane).Scan(&n); err != nil {
			return err
		}
		// Long enough for the other Processor to claim, were it allowed to.
		select {
		case <-time.After(2 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
		_, err := tx.Exec(ctx, "UPDATE app.ran SET ended_at = clock_timestamp() WHERE n = $1", n)
		return err
	}
	for range 2 {
		startGo(t, d.URL, func(p *processor.Processor) { p.HandleTx("post", handler) })
	}
	const n = 40
	var ledger, accounts []string
	for i := range n {
		ledger = append(ledger, fmt.Sprintf("entry %d", i))
		accounts = append(accounts, fmt.Sprintf("account %d", i%4))
	}
	_, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ledger", ledger)
	require.NoError(t, err)
	_, err = pgrelay.NotifyMany(context.Background(), d.Pool, "accounts", accounts)
	require.NoError(t, err)
	testenv.Eventually(t, 30*time.Second, "every event to run", func() bool {
		return d.Count("SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'") == 2*n
	})
	require.Equal(t, 2*n, d.Count("SELECT count(*) FROM app.shipments"))
	require.Equal(t, 2*n, d.Count("SELECT count(*) FROM app.ran"))
	require.Zero(t, d.Count(`SELECT count(*) FROM app.ran a JOIN app.ran b ON b.lane = a.lane AND b.n > a.n
		WHERE b.started_at < a.ended_at`), "one event at a time per channel or payload")
	order := map[string][]int64{} // origin ids by lane, in the order their committed runs ran
	rows, err := d.Pool.Query(context.Background(), "SELECT lane, origin_id FROM app.ran ORDER BY n")
	require.NoError(t, err)
	for rows.Next() {
		var lane string
		var id int64
		require.NoError(t, rows.Scan(&lane, &id))
		order[lane] = append(order[lane], id)
	}
	require.NoError(t, rows.Err())
	require.Len(t, order, 5)
	for lane, ids := range order {
		require.IsIncreasing(t, ids, "%s: in the order enqueued, each once", lane)
	}
	require.Len(t, order["ledger"], n)
}

// The events of a 'none' channel of a HandleTx handler run in direct
// batches, as those of a 'none' sql channel do: no claim is written (the
// row's dispatched_at stays NULL until the completion deletes it); the
// batch's transaction, in which each handler runs, holds the rows locked,
// and their handlers run in it one after the other.
func TestGoHandleTxRunsInDirectBatches(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('many', 'ship', p_kind := 'go')")
	many, err := pgrelay.NotifyMany(context.Background(), d.Pool, "many", []string{"a", "b", "c", "d"})
	require.NoError(t, err)
	var mu sync.Mutex
	claimed := map[int64]bool{} // by event id: its row had a claim when its handler ran
	lockedErr := map[int64]string{}
	var tx txids
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, t pgx.Tx, ev pgrelay.Event) error {
			if err := tx.note(ctx, t, ev); err != nil {
				return err
			}
			var at *time.Time
			if err := t.QueryRow(ctx, "SELECT dispatched_at FROM pgrelay.queue WHERE id = $1", ev.ID).Scan(&at); err != nil {
				return err
			}
			// Another session cannot take the row: the batch holds it.
			_, lerr := d.Pool.Exec(ctx, "SELECT FROM pgrelay.queue WHERE id = $1 FOR UPDATE NOWAIT", ev.ID)
			mu.Lock()
			claimed[ev.ID] = at != nil
			if lerr != nil {
				lockedErr[ev.ID] = lerr.Error()
			}
			mu.Unlock()
			_, err := t.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt)
			return err
		})
	})
	for _, id := range many {
		waitEnded(t, d, id)
		require.Equal(t, []string{"succeeded"}, logEvents(t, d, id), "event %d", id)
	}
	require.Equal(t, 4, d.Count("SELECT count(*) FROM app.shipments"))
	require.Equal(t, 1, tx.distinct(), "the four ran in one transaction")
	mu.Lock()
	defer mu.Unlock()
	for _, id := range many {
		require.False(t, claimed[id], "event %d: no claim written", id)
		require.Contains(t, lockedErr[id], "55P03", "event %d: locked by the batch's transaction", id)
	}
}

// A batch the server refuses at COMMIT (a deferred constraint of one
// handler's write) records nothing: its events run again one per
// transaction, where the refusal is that event's own failure and the others
// succeed. A handler that goes on after a failed statement, returning nil,
// fails its own event (the statement aborted its savepoint).
func TestGoHandleTxBatchRefusedAtCommit(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("CREATE TABLE app.refs (ref text UNIQUE DEFERRABLE INITIALLY DEFERRED)")
	d.Exec("INSERT INTO app.refs VALUES ('taken')")
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_max_attempts := 1)")
	ids, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ship", []string{"a", "taken", "b", "swallowed", "c"})
	require.NoError(t, err)
	var tx txids
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, t pgx.Tx, ev pgrelay.Event) error {
			if err := tx.note(ctx, t, ev); err != nil {
				return err
			}
			if ev.Payload == "swallowed" {
				_, _ = t.Exec(ctx, "SELECT 1/0")
				return nil
			}
			_, err := t.Exec(ctx, "INSERT INTO app.refs VALUES ($1)", ev.Payload)
			return err
		})
	})
	for _, id := range ids {
		waitEnded(t, d, id)
	}
	require.Equal(t, 1, tx.distinct(), "the first run was one batch")
	for i, id := range ids {
		want := []string{"succeeded"}
		if i == 1 || i == 3 {
			want = []string{"gave_up"}
		}
		require.Equal(t, want, logEvents(t, d, id), "event %d", id)
	}
	require.Contains(t, d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", ids[1]), "commit: ")
	require.Contains(t, d.Text("SELECT error FROM pgrelay.log WHERE origin_id = $1", ids[3]), "aborts its transaction")
	require.Equal(t, []string{"a", "b", "c", "taken"}, testenv.Column[string](t, d.Pool, "SELECT ref FROM app.refs ORDER BY ref"))
}

// SQLBatch 1 runs each HandleTx event in a transaction of its own.
func TestGoHandleTxSQLBatchOneRunsATransactionPerEvent(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	ids, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ship", []string{"a", "b", "c", "d"})
	require.NoError(t, err)
	cfg := goConfig(d.URL)
	cfg.SQLBatch = 1
	p, err := processor.NewProcessor(cfg)
	require.NoError(t, err)
	var tx txids
	p.HandleTx("ship", tx.note)
	require.NoError(t, p.Start(context.Background()))
	t.Cleanup(func() { require.NoError(t, p.Stop(context.Background())) })
	for _, id := range ids {
		waitEnded(t, d, id)
		require.Equal(t, []string{"succeeded"}, logEvents(t, d, id))
	}
	require.Equal(t, len(ids), tx.distinct())
}
