package processor_test

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/processor"
)

// A transactional handler whose process is killed (SIGKILL) mid-transaction
// leaves no effect: its write rolls back with the lost session, and with it
// the lock that was the event's claim (a direct batch writes none): the
// event is pending again, no attempt spent, and runs again, once.
func TestGoHandleTxKilledMidTransaction(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_timeout := '1 minute')")
	id := notify(t, d, "ship", "order 1")

	// The test binary again, as the child that runTestMain sends to
	// runKilledChild.
	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+d.URL)
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "written\n", line)
	require.Equal(t, 1, d.Count("SELECT count(*) FROM pgrelay.queue WHERE origin_id = $1 AND dispatched_at IS NULL", id),
		"no claim written")
	require.Zero(t, d.Count("SELECT count(*) FROM (SELECT FROM pgrelay.queue WHERE origin_id = $1 FOR UPDATE SKIP LOCKED) x", id),
		"locked by the child's batch")
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments"), "written, not committed")

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()

	attempts := make(chan int, 10)
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			attempts <- ev.Attempt
			_, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt)
			return err
		})
	})
	waitEnded(t, d, id)
	require.Equal(t, []string{"succeeded"}, logEvents(t, d, id))
	require.Equal(t, []int32{1}, testenv.Column[int32](t, d.Pool, "SELECT attempt FROM app.shipments WHERE origin_id = $1", id),
		"the killed run spent no attempt")
	require.Len(t, attempts, 1, "ran again once")
}

// A batch of HandleTx events whose process is killed (SIGKILL) after some
// of its handlers succeeded leaves no effect: their writes and the
// completion were to commit together. Every event of the batch is pending
// again when the session ends (its row locks were the claim), no attempt
// spent, and runs again, once.
func TestGoHandleTxKilledMidBatch(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_timeout := '1 minute')")
	ids, err := pgrelay.NotifyMany(context.Background(), d.Pool, "ship", []string{"order 1", "order 2", "order 3"})
	require.NoError(t, err)

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), childEnv+"="+d.URL, childEventsEnv+"=3")
	out, err := child.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, child.Start())
	t.Cleanup(func() {
		_ = child.Process.Kill()
		_ = child.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "written\n", line, "the third handler ran")
	require.Zero(t, d.Count("SELECT count(*) FROM app.shipments"), "the two handlers that returned nil did not commit alone")
	require.Empty(t, testenv.Column[string](t, d.Pool, "SELECT event FROM pgrelay.log"))

	require.NoError(t, child.Process.Kill())
	_ = child.Wait()

	var mu sync.Mutex
	ran := map[int64]int{}
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("ship", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			mu.Lock()
			ran[ev.OriginID]++
			mu.Unlock()
			_, err := tx.Exec(ctx, "INSERT INTO app.shipments VALUES ($1, $2)", ev.OriginID, ev.Attempt)
			return err
		})
	})
	for _, id := range ids {
		waitEnded(t, d, id)
		require.Equal(t, []string{"succeeded"}, logEvents(t, d, id))
		require.Equal(t, []int32{1}, testenv.Column[int32](t, d.Pool, "SELECT attempt FROM app.shipments WHERE origin_id = $1", id))
	}
	mu.Lock()
	defer mu.Unlock()
	require.Equal(t, map[int64]int{ids[0]: 1, ids[1]: 1, ids[2]: 1}, ran, "each ran again once")
}
