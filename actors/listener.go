package actors

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events/store"
)

// listen holds a connection that LISTENs on "pgrelay" (notify() wakes it) and
// wakes the claimer on every notification. A notification that names a
// channel (by its wakeHint: anyone may LISTEN) also goes to that channel's
// batcher, if it has one, which starts a batch without waiting for the
// claim; one that names nothing known costs a claim. When the connection breaks it
// reconnects with backoff and wakes the claimer once, to catch up on what it
// missed; the claimer's poll covers the gap.
func listen(ctx context.Context, d *deps, cfg *pgxpool.Config) {
	failures := 0
	for ctx.Err() == nil {
		cc := cfg.ConnConfig.Copy()
		store.PinSearchPath(cc)
		err := listenOnce(ctx, d, cc)
		if ctx.Err() != nil {
			return
		}
		failures++
		d.log.Warn("listener connection lost; reconnecting", "err", err, "attempt", failures)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(failures)):
		}
	}
}

func listenOnce(ctx context.Context, d *deps, cc *pgx.ConnConfig) error {
	conn, err := pgx.ConnectConfig(ctx, cc)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := store.Listen(ctx, conn); err != nil {
		return err
	}
	claimer, _, _ := d.pids()
	d.send(claimer, &wake{})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		claimer, dispatcher, _ := d.pids()
		if n.Payload != "" && d.direct {
			d.send(dispatcher, &batchHint{hint: n.Payload, seen: time.Now()})
		}
		d.send(claimer, &wake{})
	}
}
