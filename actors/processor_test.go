package actors_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

func TestActorSQLHandlerRunsEveryEvent(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text, at timestamptz DEFAULT clock_timestamp())`)
	e.Exec(`SELECT pgrelay.register('c1', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	p := e.startProcessor(nil)
	for i := range 200 {
		e.Exec(`SELECT pgrelay.notify('c1', $1)`, fmt.Sprint(i))
	}
	testenv.Eventually(e.T, 30*time.Second, "200 events to run", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 200
	})
	require.Equal(t, 200, e.Count(`SELECT count(DISTINCT payload) FROM ran`))
	require.Equal(t, 200, e.Count(`SELECT count(*) FROM ran`))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.queue`))
	require.NoError(t, p.Stop(context.Background()))
	require.Equal(t, 0, e.Count(`SELECT count(*) FROM pgrelay.processors`))
}

// Start opens a few hot connections before it returns, so the first events
// do not wait for the server to start backends: the pool's own four, not
// four more beside them (each a backend that compiles and plans pgrelay's
// statements).
func TestActorStartWarmsConnections(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := e.startProcessor(nil)
	require.Equal(t, int32(4), actors.HotPoolConns(p), "hot connections open at start")
}
