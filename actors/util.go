package actors

import (
	"fmt"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

func typeName(v any) string { return fmt.Sprintf("%T", v) }

// ticker sends msg() to pid every interval until the returned stop is called.
// Actors start one in Started and stop it in Stopping and Restarting, so a
// restarted actor never has two.
func ticker(d *deps, pid *actor.PID, interval time.Duration, msg func() any) (stop func()) {
	done := make(chan struct{})
	t := time.NewTicker(interval)
	go func() {
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				d.send(pid, msg())
			}
		}
	}()
	var stopped bool
	return func() {
		if !stopped {
			stopped = true
			close(done)
		}
	}
}

// backoff returns the delay before retry n (1, 2, ...): 100 ms doubling to 5 s.
func backoff(n int) time.Duration {
	d := 100 * time.Millisecond
	for i := 1; i < n && d < 5*time.Second; i++ {
		d *= 2
	}
	return min(d, 5*time.Second)
}
