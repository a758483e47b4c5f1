package actors

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/events/store"
)

// listener runs listen in the background, from startListener to Stop.
type listener struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startListener starts listening for wake-ups on a connection of its own,
// configured as cfg's.
func startListener(d *deps, cfg *pgxpool.Config) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		listen(ctx, d, cfg)
	}()
	return l
}

// Stop stops listening and arming, and returns once both have (nothing to
// do for a listener never started).
func (l *listener) Stop() {
	if l == nil {
		return
	}
	l.cancel()
	<-l.done
}

// listen holds a connection that LISTENs on "pgrelay" (notify() wakes it)
// and wakes the claimer on each notification. One that names a channel (by
// its wakeHint: anyone may LISTEN) goes to the dispatcher instead: to the
// channel's batcher if it is running, which starts a batch without waiting
// for a claim; to the claimer as a claim of that channel alone if its events
// are claimed in mode 'none'; else to the claimer. Producers send a
// notification only when a Processor armed their wake-up slot (see
// pgrelay.wake_slots), so every notification, and every (re)connection, also
// has the armer arm the slots again (d.askArm), after which the armer wakes
// the claimer (the rows of producers that found their slot taken): so a
// notification taken by a batcher is still followed by a claim, a few round
// trips later, when the batch has had the server first. A notification of a
// channel whose batcher drains full batches (d.drains) is the exception: the
// batcher finds the channel's new rows by itself, so it asks for the arming
// only when a batch comes back short (batcher.armOwed), and the channel's
// producers send no notification meanwhile. When the connection breaks it
// reconnects with backoff and wakes the claimer once, to catch up on what it
// missed; the claimer's poll covers the gap.
func listen(ctx context.Context, d *deps, cfg *pgxpool.Config) {
	armed := make(chan struct{})
	go func() {
		defer close(armed)
		arm(ctx, d, d.armDue)
	}()
	defer func() { <-armed }()
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
	d.askArm()
	claimer, _, _ := d.pids()
	d.send(claimer, &wake{})
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		claimer, dispatcher, _ := d.pids()
		if n.Payload == "" {
			d.askArm()
			d.send(claimer, &wake{})
			continue
		}
		// The dispatcher wakes the claimer unless a running batcher takes
		// the hint. A batcher that drains its channel's backlog is left the
		// arming, which it asks for once a batch comes back short.
		owed := d.drains(n.Payload)
		if !owed {
			d.askArm()
		}
		d.send(dispatcher, &batchHint{hint: n.Payload, seen: time.Now(), armOwed: owed})
	}
}

// arm arms this node's wake-up slots whenever due (d.armDue) says a
// notification may have taken one (store.ArmWakes), then wakes the claimer
// until every transaction that was in progress once they were armed has
// ended, at growing intervals (from armCheckFirst up to the poll interval):
// a producer that found its slot taken sent no notification, and its rows
// are visible to the first claim after its transaction ended. Arming again
// (due once more) supersedes the wait: a transaction still in progress then
// is in the new snapshot too. A failed arming is retried with backoff;
// meanwhile producers send no notification and the claimer's poll finds
// their rows.
func arm(ctx context.Context, d *deps, due <-chan struct{}) {
	failures := 0
	var retry <-chan time.Time
	now := false // a notification came during the last wait: arm at once
	for {
		if !now {
			select {
			case <-ctx.Done():
				return
			case <-due:
				// The batch or claim the notification started has the
				// server first.
				select {
				case <-ctx.Done():
					return
				case <-time.After(armAfterNotification):
				}
			case <-retry:
			}
		}
		now, retry = false, nil
		snapshot, err := d.store.ArmWakes(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			failures++
			d.metrics.DBErrors.WithLabelValues("arm").Inc()
			d.log.Warn("arming wake-ups failed; retrying (the poll finds new rows meanwhile)", "err", err, "attempt", failures)
			retry = time.After(backoff(failures))
			continue
		}
		failures = 0
		d.hook("armer", armedWakes{})
		now = awaitArmed(ctx, d, due, snapshot)
	}
}

// armedWakes is what the armer shows a test hook after each arming.
type armedWakes struct{}

// awaitArmed wakes the claimer until the transactions in progress at
// snapshot have all ended; true when a notification came first (arm again).
func awaitArmed(ctx context.Context, d *deps, due <-chan struct{}, snapshot string) (again bool) {
	wait := armCheckFirst
	for {
		ended, err := d.store.WakeXidsEnded(ctx, snapshot)
		claimer, _, _ := d.pids()
		d.send(claimer, &wake{})
		if err != nil {
			if ctx.Err() == nil {
				d.metrics.DBErrors.WithLabelValues("arm").Inc()
				d.log.Warn("checking the transactions behind taken wake-ups failed; the poll finds their rows", "err", err)
			}
			return false
		}
		if ended {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-due:
			return true
		case <-time.After(wait):
		}
		wait = min(2*wait, d.cfg.PollInterval)
	}
}

// armAfterNotification is how long the armer waits after a notification
// before it arms the slots (a notification that came during a wait for
// transactions is armed for at once): the batch or claim the notification
// started runs first, not beside the arming and the claim that follows it,
// on a server with few cores (docs/benchmarks.md). Until the slot is armed
// its producers send nothing: their events are claimed after the arming
// (those in progress then once they end), a millisecond later at most.
const armAfterNotification = time.Millisecond

// armCheckFirst is how long the armer waits before it first checks again
// for the transactions in progress at an arming: about a commit's time, as
// such a transaction is most often a producer about to commit.
const armCheckFirst = 250 * time.Microsecond
