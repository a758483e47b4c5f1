package bench

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/events/store"
)

// The ceiling scenario: the burn-down by the best bare loop we can write on
// the same schema, without actors, with the same guarantees per event as the
// Processor's direct batches (each handler under its own savepoint, one log
// row per event, the queue row deleted in the same transaction).

// The bare loop's defaults (--ceiling-loops, --ceiling-claim), the fastest
// found on a 2-core machine (docs/benchmarks.md, "Burn-down and the ceiling").
const (
	defaultCeilingLoops = 2
	defaultCeilingClaim = 1000
)

// scenarioCeiling: the burn-down without actors, for reference. Each of
// --ceiling-loops goroutines loops on a connection of its own, one round trip
// per transaction: a savepoint, the handler and its release per claimed
// event, one statement that deletes the batch's queue rows and inserts their
// log rows (ids drawn in one _next_ids call), COMMIT, and in the same
// pipeline BEGIN and the claim of the next --ceiling-claim rows FOR UPDATE
// SKIP LOCKED. Every statement is prepared once per connection.
// --ceiling-reset adds what a Processor's batch sends besides the
// savepoints: the channel's statement_timeout before the first handler, and
// the clean session after the last (RESET ALL, RESET ROLE, and RESET
// SESSION AUTHORIZATION on a superuser login, then the timeout off), before
// the completion.
func (b *bench) scenarioCeiling(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_ceiling"
	res := &scenarioResult{Name: "ceiling"}
	n := b.o.Events
	loops, claim := b.ceilingShape()
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()
	mark, pre, err := b.preinsert(ctx, "ceiling", channel, n)
	if err != nil {
		return nil, err
	}
	res.add(pre)
	handler, node, timeoutMS, err := b.loopChannel(ctx, channel)
	if err != nil {
		return res, err
	}
	var conns []*pgx.Conn
	loopSQL := map[*pgx.Conn][]string{}
	defer func() {
		for _, c := range conns {
			_ = c.Close(context.WithoutCancel(ctx))
		}
	}()
	for range loops {
		c, reset, err := b.loopConn(ctx, handler, timeoutMS, b.o.CeilingReset)
		if err != nil {
			return res, err
		}
		loopSQL[c] = reset
		conns = append(conns, c)
	}
	stopProf, err := b.prof.start("ceiling")
	if err != nil {
		return res, err
	}
	defer stopProf()
	walFrom, err := b.mark(ctx)
	if err != nil {
		return res, err
	}
	var done, lastCommit atomic.Int64
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(conns))
	var wg sync.WaitGroup
	start := time.Now()
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := bareLoop{conn: c, channel: channel, handler: handler, node: node, claim: claim,
				reset: loopSQL[c], done: &done, last: &lastCommit}
			if err := l.run(wctx); err != nil {
				errs <- err
				cancel()
			}
		}()
	}
	fw, ferr := b.follow(wctx, follow{label: "ceiling: bare loop", target: int64(n), done: done.Load, start: start})
	if ferr != nil {
		cancel()
	}
	wg.Wait() // each loop ends when its claim comes back empty
	stopProf()
	close(errs)
	if err := <-errs; err != nil {
		return res, err
	}
	if ferr != nil {
		return res, ferr
	}
	took := time.Unix(0, lastCommit.Load()).Sub(start)
	cost, err := b.costSince(ctx, walFrom, int64(n), 0)
	if err != nil {
		return res, err
	}
	if err := checkLog(ctx, b.pool, mark, []string{channel}, int64(n), true); err != nil {
		return res, err
	}
	m := res.add(newMeasurement("burn-down", "bare loop", int64(n), took, "events/s"))
	m.Cost = cost
	fw.series[len(fw.series)-1].T = secs(took) // the exact last commit
	m.Series = fw.series
	what := "a savepoint per handler"
	if b.o.CeilingReset {
		what = "a savepoint per handler, the timeout and the session reset per batch"
	}
	m.Detail = fmt.Sprintf("%d connections; claim %d FOR UPDATE SKIP LOCKED, %s, one DELETE+log INSERT per batch, the next claim pipelined after COMMIT; %d log rows checked",
		loops, claim, what, n)
	return res, nil
}

// ceilingShape is the bare loop's number of loops and claim size.
func (b *bench) ceilingShape() (loops, claim int) {
	loops, claim = b.o.CeilingLoops, b.o.CeilingClaim
	if loops <= 0 {
		loops = defaultCeilingLoops
	}
	if claim <= 0 {
		claim = defaultCeilingClaim
	}
	return loops, claim
}

const (
	bareClaim = `SELECT id, payload FROM pgrelay.queue
	 WHERE channel = $1::text AND dispatched_at IS NULL AND not_before <= now()
	 ORDER BY not_before, id LIMIT $2::int FOR UPDATE SKIP LOCKED`
	// bareComplete deletes the batch's queue rows and logs each as
	// succeeded, its log id from one _next_ids call.
	bareComplete = `WITH d AS (
	   DELETE FROM pgrelay.queue q WHERE q.id = ANY($1::bigint[])
	   RETURNING q.id, q.origin_id, q.channel, q.attempt
	 ), x AS (
	   SELECT d.*, row_number() OVER (ORDER BY d.id) AS rn FROM d
	 ), ids AS (
	   SELECT pgrelay._next_ids(cardinality($1::bigint[])) AS a
	 )
	 INSERT INTO pgrelay.log (id, queue_id, origin_id, channel, attempt, event, node)
	 SELECT ids.a[x.rn], x.id, x.origin_id, x.channel, x.attempt, 'succeeded', $2::int FROM x, ids`
)

// loopChannel reads what the bare loop needs of channel: its handler, this
// node's id and the channel's timeout in milliseconds.
func (b *bench) loopChannel(ctx context.Context, channel string) (handler string, node int32, timeoutMS int64, err error) {
	err = b.pool.QueryRow(ctx, `SELECT c.handler, pgrelay._this_node(),
		  (EXTRACT(epoch FROM c.timeout) OPERATOR(pg_catalog.*) 1000::pg_catalog.numeric)::pg_catalog.int8
		FROM pgrelay.channels c WHERE c.channel OPERATOR(pg_catalog.=) $1::pg_catalog.text`, channel).Scan(&handler, &node, &timeoutMS)
	if err != nil {
		return "", 0, 0, fmt.Errorf("read channel %s's handler: %w", channel, err)
	}
	return handler, node, timeoutMS, nil
}

// loopConn opens a connection of the bare loop on the measured systems' URL
// (with the bench pool's settings: pgrelay's search_path pinned) and
// prepares its statements before any clock starts, as the Processor's warm
// connections have theirs. With reset, it returns what a Processor's batch
// sends besides the savepoints: the channel's timeout before the first
// handler, and the clean session after the last.
func (b *bench) loopConn(ctx context.Context, handler string, timeoutMS int64, withReset bool) (*pgx.Conn, []string, error) {
	ccfg, err := pgx.ParseConfig(b.measuredURL())
	if err != nil {
		return nil, nil, fmt.Errorf("parse the database URL: %w", err)
	}
	store.PinSearchPath(ccfg)
	c, err := pgx.ConnectConfig(ctx, ccfg)
	if err != nil {
		return nil, nil, fmt.Errorf("connect: %w", err)
	}
	var reset []string
	if withReset {
		reset = []string{fmt.Sprintf("SET LOCAL statement_timeout = %d", max(timeoutMS, 1)), "RESET ALL", "RESET ROLE"}
		if c.PgConn().ParameterStatus("is_superuser") == "on" {
			reset = append(reset[:2:2], "RESET SESSION AUTHORIZATION", "RESET ROLE")
		}
		reset = append(reset, "SET LOCAL statement_timeout = 0")
	}
	for _, sql := range append([]string{bareClaim, bareComplete, handler, "SAVEPOINT pgrelay_event", "RELEASE SAVEPOINT pgrelay_event"}, reset...) {
		if _, err := c.Prepare(ctx, sql, sql); err != nil {
			_ = c.Close(ctx)
			return nil, nil, fmt.Errorf("prepare %q: %w", sql, err)
		}
	}
	return c, reset, nil
}

// bareLoop is one loop of the ceiling on its own connection.
type bareLoop struct {
	conn             *pgx.Conn
	channel, handler string
	node             int32
	claim            int
	// reset: the timeout before a batch's first handler, then the session
	// reset after its last (--ceiling-reset).
	reset []string
	// done counts the committed events; last is the time of the last
	// commit (unix nanoseconds).
	done, last *atomic.Int64

	ids      []int64
	payloads []string
}

// run claims, runs and completes the channel's events until a claim comes
// back empty.
func (l *bareLoop) run(ctx context.Context) (err error) {
	defer func() {
		if err != nil && l.conn.PgConn().TxStatus() != 'I' {
			_, _ = l.conn.Exec(context.WithoutCancel(ctx), "ROLLBACK")
		}
	}()
	first := &pgx.Batch{}
	first.Queue("BEGIN")
	l.queueClaim(first)
	if err := l.send(ctx, first, 0); err != nil {
		return fmt.Errorf("claim: %w", err)
	}
	for len(l.ids) > 0 {
		ids := l.ids
		b := &pgx.Batch{}
		if len(l.reset) > 0 {
			b.Queue(l.reset[0]) // the channel's timeout
		}
		for _, p := range l.payloads {
			b.Queue("SAVEPOINT pgrelay_event")
			b.Queue(l.handler, p)
			b.Queue("RELEASE SAVEPOINT pgrelay_event")
		}
		if len(l.reset) > 0 {
			for _, r := range l.reset[1:] {
				b.Queue(r)
			}
		}
		b.Queue(bareComplete, ids, l.node)
		b.Queue("COMMIT")
		b.Queue("BEGIN")
		l.queueClaim(b)
		if err := l.send(ctx, b, len(ids)); err != nil {
			return fmt.Errorf("run and complete %d events: %w", len(ids), err)
		}
	}
	if _, err := l.conn.Exec(ctx, "COMMIT"); err != nil {
		return fmt.Errorf("commit the empty claim: %w", err)
	}
	return nil
}

// queueClaim queues the claim of the next rows, read by send.
func (l *bareLoop) queueClaim(b *pgx.Batch) {
	l.ids, l.payloads = l.ids[:0:0], l.payloads[:0]
	b.Queue(bareClaim, l.channel, l.claim).Query(func(rows pgx.Rows) error {
		var id int64
		var payload string
		_, err := pgx.ForEachRow(rows, []any{&id, &payload}, func() error {
			l.ids, l.payloads = append(l.ids, id), append(l.payloads, payload)
			return nil
		})
		return err
	})
}

// send runs b, whose last statements are the claim and, when completing is
// positive, before it BEGIN, COMMIT and the completion of that many events.
func (l *bareLoop) send(ctx context.Context, b *pgx.Batch, completing int) error {
	n := b.Len()
	if completing > 0 {
		b.QueuedQueries[n-4].Exec(func(tag pgconn.CommandTag) error {
			if tag.RowsAffected() != int64(completing) {
				return fmt.Errorf("logged %d events, want %d", tag.RowsAffected(), completing)
			}
			return nil
		})
		b.QueuedQueries[n-3].Exec(func(tag pgconn.CommandTag) error {
			if tag.String() != "COMMIT" {
				return fmt.Errorf("the transaction ended with %s", tag)
			}
			l.done.Add(int64(completing))
			l.last.Store(time.Now().UnixNano())
			return nil
		})
	}
	return l.conn.SendBatch(ctx, b).Close()
}
