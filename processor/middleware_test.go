package processor_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/processor"
)

// Use wraps every kind of Go handler, registered before or after it: the
// first middleware given runs outermost, a later Use inside the earlier
// ones; each sees the handler's name, its events and, for a transactional
// handler, its transaction.
func TestUseWrapsEveryHandlerInOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := goDB(t)
	for _, ch := range []string{"plain", "tx", "batch", "typed"} {
		d.Exec("SELECT pgrelay.register($1, $1, p_kind := 'go')", ch)
	}
	p, err := processor.NewProcessor(goConfig(d.URL))
	require.NoError(t, err)

	var mu sync.Mutex
	var trail []string
	say := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		trail = append(trail, s)
	}
	calls := map[string]processor.Call{}
	record := func(name string) processor.Middleware {
		return func(ctx context.Context, call processor.Call, next func(context.Context) error) error {
			say(name + ">")
			if name == "a" {
				mu.Lock()
				calls[call.Handler] = call
				mu.Unlock()
			}
			err := next(ctx)
			say("<" + name)
			return err
		}
	}
	p.Handle("plain", func(context.Context, pgrelay.Event) error { say("plain"); return nil })
	p.Use(record("a"), record("b"))
	p.HandleTx("tx", func(context.Context, pgx.Tx, pgrelay.Event) error { say("tx"); return nil })
	p.HandleTxBatch("batch", func(context.Context, pgx.Tx, []pgrelay.Event) error { say("batch"); return nil })
	processor.HandleJSON(p, "typed", func(_ context.Context, _ pgrelay.Event, v struct{ N int }) error {
		say(fmt.Sprint("typed ", v.N))
		return nil
	})
	p.Use(record("c"))

	for _, ch := range []string{"plain", "tx", "batch", "typed"} {
		id := notify(t, d, ch, `{"N": 7}`)
		trail = nil
		outs, err := p.Work(ctx, ch)
		require.NoError(t, err)
		require.Len(t, outs, 1)
		require.Equal(t, "succeeded", outs[0].Result, ch)
		want := ch
		if ch == "typed" {
			want = "typed 7"
		}
		require.Equal(t, []string{"a>", "b>", "c>", want, "<c", "<b", "<a"}, trail, ch)
		call := calls[ch]
		require.Equal(t, ch, call.Handler)
		require.Len(t, call.Events, 1)
		require.Equal(t, id, call.Events[0].OriginID)
		require.Equal(t, ch == "tx" || ch == "batch", call.Tx != nil, "%s: the transaction of a transactional handler", ch)
	}
}

// A middleware that recovers a handler's panic decides what it means: here
// a permanent failure, where a panic alone is a failed attempt to retry.
func TestUseRecoversPanics(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go', p_retry_delay := '0')")
	recovering := func(ctx context.Context, call processor.Call, next func(context.Context) error) (err error) {
		defer func() {
			if r := recover(); r != nil {
				err = pgrelay.Permanent(fmt.Errorf("handler %s panicked: %v", call.Handler, r))
			}
		}()
		return next(ctx)
	}
	for _, recover := range []bool{false, true} {
		p, err := processor.NewProcessor(goConfig(d.URL))
		require.NoError(t, err)
		if recover {
			p.Use(recovering)
		}
		p.Handle("ship", func(context.Context, pgrelay.Event) error { panic("no carrier") })
		id := notify(t, d, "ship", "order 7")
		outs, err := p.Work(ctx, "ship")
		require.NoError(t, err)
		require.Len(t, outs, 1)
		if !recover {
			require.Equal(t, "failed", outs[0].Result, "a panic alone is a failed attempt, retried")
			require.ErrorContains(t, outs[0].Err, "handler panicked: no carrier")
			d.Exec("DELETE FROM pgrelay.queue WHERE origin_id = $1", id)
			continue
		}
		require.Equal(t, "gave_up", outs[0].Result, "the middleware made it permanent")
		require.ErrorContains(t, outs[0].Err, "handler ship panicked: no carrier")
		require.Equal(t, []string{"gave_up"}, logEvents(t, d, id))
	}
}

// Use after Start is a programming error, as Handle after Start is.
func TestUseAfterStartPanics(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	d.Exec("SELECT pgrelay.register('ship', 'ship', p_kind := 'go')")
	p := startGo(t, d.URL, shipNothing)
	require.PanicsWithValue(t, "pgrelay: Use after Start", func() {
		p.Use(func(ctx context.Context, _ processor.Call, next func(context.Context) error) error { return next(ctx) })
	})
}
