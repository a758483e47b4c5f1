package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/actors"
)

// burn-down's --burn-down-run: the burn-down as an outside harness measures
// it, a `pgrelay run` process timed from its start to its last completion,
// beside the in-process figure of the same run of the bench.

const (
	// runPoll is how often the bench asks whether the run's events are all
	// done: one EXISTS on the queue, cheap beside the run it watches.
	runPoll = 20 * time.Millisecond
	// runOutputMax bounds the process's output kept for an error message.
	runOutputMax = 4 << 10
	// runStopMargin: the process must exit within run's default shutdown
	// timeout and this of SIGTERM.
	runStopMargin = 30 * time.Second
)

// burnDownRun adds to res two rows: n events pre-inserted into channel
// afresh (reported, not counted), then the run of a process. It starts this
// program as `pgrelay run --database-url` with run's defaults (nothing else
// on its command line; the bench's Config.RunEnv as its environment), waits
// until the queue holds none of the channel's events and stops the process
// with SIGTERM: it must exit 0. The time runs from just before the exec to
// the at of the run's last succeeded log row, both on the server's clock;
// the startup to the at of the first.
func (b *bench) burnDownRun(ctx context.Context, res *scenarioResult, channel string, n int) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("pgrelay run: find this program to start it: %w", err)
	}
	mark, pre, err := b.preinsert(ctx, "burn-down: pgrelay run", channel, n)
	if err != nil {
		return err
	}
	pre.Name = fmt.Sprintf("pre-insert for the run process (notify_many x %d)", b.o.Batch)
	res.add(pre)
	var start time.Time
	if err := b.pool.QueryRow(ctx, `SELECT pg_catalog.clock_timestamp()`).Scan(&start); err != nil {
		return fmt.Errorf("pgrelay run: read the server's clock: %w", err)
	}
	p, err := startRunProcess(exe, b.runEnv, "run", "--database-url", b.measuredURL())
	if err != nil {
		return err
	}
	defer p.kill()
	if err := b.awaitQueueEmpty(ctx, channel, p); err != nil {
		p.kill()
		return fmt.Errorf("pgrelay run: %w; its output ends: %s", err, p.output())
	}
	if err := p.stop(actors.Defaults().ShutdownTimeout + runStopMargin); err != nil {
		return err
	}
	var first, last time.Time
	if err := b.pool.QueryRow(ctx, `SELECT pg_catalog.min(at), pg_catalog.max(at) FROM pgrelay.log
		WHERE id > $1::pg_catalog.int8 AND channel = $2::pg_catalog.text AND event = 'succeeded'`, mark, channel).Scan(&first, &last); err != nil {
		return fmt.Errorf("pgrelay run: read its first and last completion: %w", err)
	}
	if err := checkLog(ctx, b.pool, mark, []string{channel}, int64(n), true); err != nil {
		return fmt.Errorf("pgrelay run: %w", err)
	}
	series, err := logSeries(ctx, b, mark, channel, start, last)
	if err != nil {
		return err
	}
	took, startup := last.Sub(start), first.Sub(start)
	m := res.add(newMeasurement("run process, from its exec", "pgrelay", int64(n), took, "events/s"))
	m.StartupSeconds = secs(startup)
	m.Series = series
	after := "-"
	if last.After(first) {
		after = fmt.Sprintf("%.0f events/s", float64(n-1)/last.Sub(first).Seconds())
	}
	m.Detail = fmt.Sprintf("`pgrelay run --database-url`, run's defaults otherwise, started by the bench; "+
		"from just before its exec to the last completion's log row (server clock); "+
		"startup (to the first completion) %.3fs, then %s; SIGTERM: exit 0; %d succeeded log rows checked",
		startup.Seconds(), after, n)
	return nil
}

// awaitQueueEmpty waits until the queue holds none of channel's events. It
// fails when the process exits, or when no log row was added for
// stallAfter.
func (b *bench) awaitQueueEmpty(ctx context.Context, channel string, p *runProcess) error {
	bar := b.prog.startAt("burn-down: pgrelay run", 0, p.started)
	defer bar.finish()
	t := time.NewTicker(runPoll)
	defer t.Stop()
	var lastID int64 = -1
	lastChange := time.Now()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-p.done:
			return fmt.Errorf("it exited before the queue was empty: %v", p.err)
		case <-t.C:
		}
		var pending bool
		var logID int64
		if err := b.pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgrelay.queue WHERE channel = $1::pg_catalog.text),
			COALESCE((SELECT pg_catalog.max(id) FROM pgrelay.log), 0)`, channel).Scan(&pending, &logID); err != nil {
			return fmt.Errorf("look for its events in the queue: %w", err)
		}
		if !pending {
			return nil
		}
		bar.set(0)
		if now := time.Now(); logID != lastID {
			lastID, lastChange = logID, now
		} else if now.Sub(lastChange) > stallAfter {
			return fmt.Errorf("no log row was added for %s", stallAfter)
		}
	}
}

// logSeries is the run's completions over time from its succeeded log rows,
// per sampleEvery since start (the last point at last).
func logSeries(ctx context.Context, b *bench, mark int64, channel string, start, last time.Time) ([]seriesPoint, error) {
	slot := sampleEvery.Seconds()
	rows, err := b.pool.Query(ctx, `SELECT pg_catalog.floor(extract(epoch FROM at - $3::pg_catalog.timestamptz) / $4::pg_catalog.float8)::pg_catalog.int8,
		  pg_catalog.count(*)
		FROM pgrelay.log WHERE id > $1::pg_catalog.int8 AND channel = $2::pg_catalog.text AND event = 'succeeded'
		GROUP BY 1 ORDER BY 1`,
		mark, channel, start, slot)
	if err != nil {
		return nil, fmt.Errorf("pgrelay run: read its completions over time: %w", err)
	}
	series := []seriesPoint{{T: 0, Done: 0}}
	end := secs(last.Sub(start))
	var i, k, done int64
	_, err = pgx.ForEachRow(rows, []any{&i, &k}, func() error {
		done += k
		series = append(series, seriesPoint{T: min(round(float64(i+1)*slot, 3), end), Done: done})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("pgrelay run: read its completions over time: %w", err)
	}
	return series, nil
}

// runProcess is a `pgrelay run` process the bench started.
type runProcess struct {
	cmd     *exec.Cmd
	out     *tailBuffer
	started time.Time
	done    chan struct{} // closed once it exited; err is then cmd.Wait's
	err     error
}

// startRunProcess starts exe with args and env (nil: this process's), its
// output kept in a bounded buffer.
func startRunProcess(exe string, env []string, args ...string) (*runProcess, error) {
	p := &runProcess{out: &tailBuffer{max: runOutputMax}, done: make(chan struct{})}
	p.cmd = exec.Command(exe, args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("pgrelay run: start %s: %w", exe, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM and waits up to wait for the exit, which must be 0;
// then it kills the process.
func (p *runProcess) stop(wait time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("pgrelay run: send SIGTERM: %w", err)
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		p.kill()
		return fmt.Errorf("pgrelay run: no exit within %s of SIGTERM; its output ends: %s", wait, p.output())
	}
	if p.err != nil {
		return fmt.Errorf("pgrelay run: after SIGTERM: %w; its output ends: %s", p.err, p.output())
	}
	return nil
}

// kill ends the process unless it exited, and waits for its end.
func (p *runProcess) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// output is the end of what the process wrote (once it exited).
func (p *runProcess) output() string { return p.out.String() }

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.b)
}
