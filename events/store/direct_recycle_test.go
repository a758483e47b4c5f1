package store

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

// A recycled batch's events slice holds nothing of it: the batch after it
// has exactly its own events, however many fewer, and a recycled batch
// gives its events up. Go batches are not recycled (their events went to
// application code).
func TestDirectBatchRecycledSliceHoldsOnlyItsOwnEvents(t *testing.T) {
	e := newStaleEnv(t, `CREATE TABLE public.ran (p text)`)
	e.exec(`SELECT pgrelay.register('r', 'INSERT INTO public.ran VALUES ($1)')`)
	e.exec(`SELECT pgrelay.register('q', 'INSERT INTO public.ran VALUES ($1)', p_concurrency_mode := 'channel')`)
	ctx := context.Background()
	scope := ClaimScope{Mode: "single"}
	run := func(want []string, batch func() (*DirectBatch, error)) {
		t.Helper()
		b, err := batch()
		require.NoError(t, err)
		got := map[string]events.Kind{}
		for _, ev := range b.Events {
			got[ev.Payload] = ev.Outcome
		}
		exp := map[string]events.Kind{}
		for _, p := range want {
			exp[p] = events.Succeeded
		}
		require.Equal(t, exp, got)
		require.Len(t, b.Events, len(want))
		e.s.Recycle(b)
		require.Nil(t, b.Events, "a recycled batch gives its events up")
	}
	payloads := func(prefix string, n int) []string {
		var ps []string
		for i := range n {
			ps = append(ps, fmt.Sprintf("%s%d", prefix, i))
		}
		return ps
	}
	for _, n := range []int{200, 70, 100, 3} {
		ps := payloads(fmt.Sprintf("d%d-", n), n)
		e.exec(`SELECT pgrelay.notify_many('r', $1)`, ps)
		run(ps, func() (*DirectBatch, error) { return e.s.RunDirect(ctx, scope, "r", 500) })
		// Lane batches share the slices: one serialised channel, one
		// event a batch.
		e.exec(`SELECT pgrelay.notify('q', $1)`, "lane"+ps[0])
		run([]string{"lane" + ps[0]}, func() (*DirectBatch, error) { return e.s.RunLanes(ctx, scope, LaneKey{}, 500) })
	}
	require.Equal(t, 200+70+100+3+4, e.count(`SELECT count(*) FROM public.ran`))

	// A batch that is not a sql batch keeps its events.
	b := &DirectBatch{Events: make([]DirectEvent, 0, 100)}
	e.s.Recycle(b)
	require.NotNil(t, b.Events)
}
