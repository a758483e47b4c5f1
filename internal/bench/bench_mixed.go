package bench

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// The burn-down's mixed load (--mixed-producers, --mixed-rate): while the
// Processor drains the pre-inserted backlog, producers enqueue more events
// into the same channel, each with pgrelay.notify() in a transaction of its
// own, on an open-loop schedule of --mixed-rate events/s in total. They
// stop once as many events completed as the backlog held; the run then ends
// when every event, pre-inserted or produced, has completed.

// mixedProducers runs b.o.MixedProducers producers into channel; stop ends them and
// returns how many events they enqueued (each committed).
func (b *bench) mixedProducers(ctx context.Context, channel string) (stop func() (int64, error), err error) {
	n := b.o.MixedProducers
	var conns []*pgx.Conn
	closeAll := func() {
		for _, c := range conns {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}
	for range n {
		// The bench pool's settings: pgrelay's search_path pinned.
		c, err := pgx.ConnectConfig(ctx, b.pool.Config().ConnConfig)
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("connect a producer: %w", err)
		}
		conns = append(conns, c)
	}
	// stopped ends the schedules; a call under way finishes on ctx, so
	// that every event counted is committed and none committed uncounted.
	stopped, cancel := context.WithCancel(ctx)
	var produced atomic.Int64
	errs := make(chan error, n)
	var wg sync.WaitGroup
	// Each producer sends every n-th event of the schedule.
	every := time.Duration(float64(time.Second) * float64(n) / b.o.MixedRate)
	start := time.Now()
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := produceMixed(ctx, stopped, c, channel, i, start.Add(every*time.Duration(i)/time.Duration(n)), every, &produced); err != nil {
				errs <- err
			}
		}()
	}
	return func() (int64, error) {
		cancel()
		wg.Wait()
		closeAll()
		close(errs)
		var all []error
		for err := range errs {
			all = append(all, err)
		}
		return produced.Load(), errors.Join(all...)
	}, nil
}

// produceMixed enqueues one event at first, then one every interval, until
// stopped ends, counting those committed in produced. A producer behind its
// schedule sends at once.
func produceMixed(ctx, stopped context.Context, c *pgx.Conn, channel string, id int, first time.Time, every time.Duration,
	produced *atomic.Int64) error {
	t := time.NewTimer(0)
	defer t.Stop()
	for k := 0; ; k++ {
		t.Reset(time.Until(first.Add(every * time.Duration(k))))
		select {
		case <-stopped.Done():
			return nil
		case <-t.C:
		}
		_, err := c.Exec(ctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`, channel, "live-"+strconv.Itoa(id)+"-"+strconv.Itoa(k))
		if err != nil {
			return fmt.Errorf("producer %d: notify: %w", id, err)
		}
		produced.Add(1)
	}
}
