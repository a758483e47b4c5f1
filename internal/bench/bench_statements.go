package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/store"
)

// The statements scenario: what a direct batch's statements cost the server
// per event, the Processor's against the bare loop's, as the CPU time of the
// one backend that runs them (/proc/<pid>/schedstat, in nanoseconds). Each
// side drains --events pre-inserted events on one connection, one batch of
// --sql-batch events at a time: the claim, a savepoint, the handler and its
// release per event, the session reset, the completion and the commit (the
// Processor's by its store's RunDirect, with its statements prepared as its
// warm connections have them; the loop's as the ceiling's, --ceiling-reset's
// statements included). One backend, one batch at a time: other
// connections' batches do not enter the figure, and being CPU time, not
// time, the machine's load moves it less than the burn-down's rate; between
// invocations it still moved by 15 % here, so compare the two sides of one
// invocation.

const statementsChannel = "pgrelay_bench_statements"

// scenarioStatements measures both sides, the Processor's first.
func (b *bench) scenarioStatements(ctx context.Context) (*scenarioResult, error) {
	res := &scenarioResult{Name: "statements"}
	n := b.o.Events
	batch := b.proc.SQLBatch
	if batch <= 0 {
		batch = actors.Defaults().SQLBatch
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, statementsChannel) })
	}()
	cpu := map[string]float64{}
	for _, system := range []string{"pgrelay", "bare loop"} {
		mark, pre, err := b.preinsert(ctx, "statements: "+system, statementsChannel, n)
		if err != nil {
			return res, err
		}
		pre.System = system
		res.add(pre)
		walFrom, err := b.mark(ctx)
		if err != nil {
			return res, err
		}
		var s statementsRun
		if system == "pgrelay" {
			s, err = b.statementsProcessor(ctx, batch)
		} else {
			s, err = b.statementsLoop(ctx, batch)
		}
		if err != nil {
			return res, fmt.Errorf("statements: %s: %w", system, err)
		}
		cost, err := b.costSince(ctx, walFrom, s.events, 0)
		if err != nil {
			return res, err
		}
		if err := checkLog(ctx, b.pool, mark, []string{statementsChannel}, int64(n), true); err != nil {
			return res, err
		}
		m := res.add(newMeasurement("a batch at a time, one connection", system, s.events, s.took, "events/s"))
		m.Cost = cost
		cpu[system] = float64(s.cpuNS) / 1e3 / float64(max(s.events, 1))
		m.Detail = fmt.Sprintf("its backend's CPU: %.2f µs an event (claim, savepoint + handler + release each, reset, completion, commit; batches of %d); %d log rows checked",
			cpu[system], batch, n)
	}
	res.ratio("statements: backend CPU per event, pgrelay/bare loop", cpu["pgrelay"], cpu["bare loop"], 0)
	return res, nil
}

// statementsRun is what one side did: the events it completed, its time and
// its backend's CPU time.
type statementsRun struct {
	events int64
	took   time.Duration
	cpuNS  int64
}

// statementsProcessor drains the channel with the Processor's direct
// batches, on a pool of one connection warmed as the Processor warms its
// hot connections.
func (b *bench) statementsProcessor(ctx context.Context, batch int) (statementsRun, error) {
	var r statementsRun
	pcfg, err := pgxpool.ParseConfig(b.measuredURL())
	if err != nil {
		return r, fmt.Errorf("parse the database URL: %w", err)
	}
	store.PinSearchPath(pcfg.ConnConfig)
	pcfg.MinConns, pcfg.MaxConns = 1, 1
	st := &store.Statements{}
	pcfg.AfterConnect = st.Warm
	hot, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return r, fmt.Errorf("connect: %w", err)
	}
	defer hot.Close()
	var pid int
	if err := hot.QueryRow(ctx, `SELECT pg_catalog.pg_backend_pid()`).Scan(&pid); err != nil {
		return r, fmt.Errorf("read the backend's pid: %w", err)
	}
	s := store.New(hot, nil, st)
	return measureBackend(pid, func() (int64, error) {
		var done int64
		for {
			bt, err := s.RunDirect(ctx, store.ClaimScope{Mode: actors.ModeSingle}, statementsChannel, batch)
			if err != nil {
				return done, err
			}
			if len(bt.Events) == 0 {
				return done, nil
			}
			done += int64(len(bt.Events))
		}
	})
}

// statementsLoop drains the channel with the ceiling's loop on one
// connection, claiming batch rows a transaction.
func (b *bench) statementsLoop(ctx context.Context, batch int) (statementsRun, error) {
	handler, node, timeoutMS, err := b.loopChannel(ctx, statementsChannel)
	if err != nil {
		return statementsRun{}, err
	}
	c, reset, err := b.loopConn(ctx, handler, timeoutMS, true)
	if err != nil {
		return statementsRun{}, err
	}
	defer func() { _ = c.Close(context.WithoutCancel(ctx)) }()
	var done, last atomic.Int64
	l := bareLoop{conn: c, channel: statementsChannel, handler: handler, node: node, claim: batch,
		reset: reset, done: &done, last: &last}
	return measureBackend(int(c.PgConn().PID()), func() (int64, error) {
		err := l.run(ctx)
		return done.Load(), err
	})
}

// measureBackend runs drain and returns the events it completed, its time
// and the CPU time of backend pid meanwhile, which must run on this machine.
func measureBackend(pid int, drain func() (int64, error)) (statementsRun, error) {
	var r statementsRun
	if localPostmaster(pid) == 0 {
		return r, fmt.Errorf("backend %d does not run on this machine: the scenario reads its CPU time from /proc", pid)
	}
	before, err := backendCPU(pid)
	if err != nil {
		return r, err
	}
	start := time.Now()
	if r.events, err = drain(); err != nil {
		return r, err
	}
	r.took = time.Since(start)
	after, err := backendCPU(pid)
	if err != nil {
		return r, err
	}
	r.cpuNS = after - before
	return r, nil
}

// backendCPU is the time the single-threaded process pid (a backend, or
// any server process: readStat) has run on a CPU, in nanoseconds (the first
// field of /proc/<pid>/schedstat), where /proc/<pid>/stat counts hundredths
// of a second: a small run's backend spends a few of them.
func backendCPU(pid int) (int64, error) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/schedstat")
	if err != nil {
		return 0, fmt.Errorf("read backend %d's CPU time: %w", pid, err)
	}
	f := strings.Fields(string(raw))
	if len(f) == 0 {
		return 0, fmt.Errorf("read backend %d's CPU time: /proc/%d/schedstat is empty", pid, pid)
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("read backend %d's CPU time: %w", pid, err)
	}
	return ns, nil
}
