package cli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// stopStep is one part of a command's stop: what it is (for "waiting for
// ..."), and the work.
type stopStep struct {
	name string
	// detail, when set, adds what the step still holds to the waiting line
	// ("3 slots in use").
	detail func() string
	run    func()
}

// stopper runs a command's stop steps in order. While a step takes longer
// than every, it says what it waits for; past the bound (0: none) it gives up
// on the step and the steps after it, so the command can exit.
type stopper struct {
	say   func(line string)
	every time.Duration
	bound time.Duration
	// log, when set, hears at debug level of each step done.
	log *slog.Logger
}

// errStopBound is returned when a stop went past its bound.
type errStopBound struct {
	bound time.Duration
	step  string
}

func (e *errStopBound) Error() string {
	return fmt.Sprintf("stopping: %s did not finish within %s; exiting without it", e.step, e.bound)
}

// stop runs steps in order; it returns *errStopBound when the bound passed.
func (s *stopper) stop(steps ...stopStep) error {
	var deadline <-chan time.Time
	if s.bound > 0 {
		t := time.NewTimer(s.bound)
		defer t.Stop()
		deadline = t.C
	}
	for _, st := range steps {
		done := make(chan struct{})
		go func() {
			defer close(done)
			st.run()
		}()
		// A ticker of the step's own, started after stepStart: its first tick
		// comes when the step has taken every (one shared across steps ticked
		// a hair before that for the first step, and its line was skipped).
		stepStart := time.Now()
		tick := time.NewTicker(s.every)
	wait:
		for {
			select {
			case <-done:
				break wait
			case <-tick.C:
				line := fmt.Sprintf("stopping: waiting for %s (%s", st.name, time.Since(stepStart).Round(time.Second))
				if st.detail != nil {
					if d := st.detail(); d != "" {
						line += ", " + d
					}
				}
				if s.bound > 0 {
					line += fmt.Sprintf("; exits at the latest %s after the stop began", s.bound)
				}
				s.say(line + "; Ctrl-C again to exit now)")
			case <-deadline:
				// The step goes on in its goroutine; the process exits
				// after the command returns.
				tick.Stop()
				return &errStopBound{bound: s.bound, step: st.name}
			}
		}
		tick.Stop()
		if s.log != nil {
			s.log.Debug("stop: done", "part", st.name, "took", time.Since(stepStart).Round(time.Millisecond))
		}
	}
	return nil
}

// asyncLines writes lines to w in a goroutine of its own: a writer nobody
// reads (a pipe nobody drains, a terminal that stopped scrolling) never
// holds up what says them. A line that finds asyncLinesQueued lines still
// waiting is dropped.
type asyncLines struct {
	lines chan string
	done  chan struct{}
}

const asyncLinesQueued = 64

func newAsyncLines(w io.Writer) *asyncLines {
	a := &asyncLines{lines: make(chan string, asyncLinesQueued), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for l := range a.lines {
			fmt.Fprintln(w, l)
		}
	}()
	return a
}

// say queues line, or drops it when the queue is full.
func (a *asyncLines) say(line string) {
	select {
	case a.lines <- line:
	default:
	}
}

// close waits up to wait for the queued lines to be written.
func (a *asyncLines) close(wait time.Duration) {
	close(a.lines)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-a.done:
	case <-t.C:
	}
}

// slotsInUse says how many of the Processor's slots are in use, its claimed
// events' and its running batches' (the gauges
// pgrelay_processor_slots_in_use and pgrelay_processor_batch_slots_in_use),
// or why that cannot be read.
func slotsInUse(gauges ...prometheus.Gauge) string {
	sum := 0.0
	for _, g := range gauges {
		var m dto.Metric
		if err := g.Write(&m); err != nil {
			return "slots in use unknown: " + err.Error()
		}
		sum += m.GetGauge().GetValue()
	}
	return fmt.Sprintf("%.0f slots in use", sum)
}

// exitOnSecondSignal makes a second SIGINT or SIGTERM, once ctx was
// cancelled by the first, exit the process at once (status 130): a stop that
// waits can always be cut short. It returns when done is closed.
func exitOnSecondSignal(ctx context.Context, done <-chan struct{}, stderr io.Writer, cmd string) {
	select {
	case <-ctx.Done():
	case <-done:
		return
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sig)
	select {
	case <-sig:
		fmt.Fprintf(stderr, "pgrelay %s: interrupted again: exiting without finishing the stop\n", cmd)
		os.Exit(130)
	case <-done:
	}
}
