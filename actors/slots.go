package actors

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// slots are a Processor's share of work, kept twice: one per event claimed
// and not yet ended (--concurrency), and, apart from those, one per event a
// running sql batch may take (--sql-batch-concurrency; it holds them all
// until it commits). Every take and free goes through them, which keeps
// their gauge, and every free tells the claimer. The count is shared by the
// actors, so a restarted claimer or batcher still knows it.
type slots struct {
	size  int
	used  atomic.Int64
	gauge prometheus.Gauge
	// freed is called after every free (it tells the claimer).
	freed func()
	// starved: a batcher had rows to run and no free slot; the claimer
	// claims when slots are freed, which tells the batchers again.
	starved atomic.Bool
}

func newSlots(size int, gauge prometheus.Gauge, freed func()) *slots {
	return &slots{size: size, gauge: gauge, freed: freed}
}

// take takes n slots, whether or not they are free (claimed rows are
// already taken).
func (s *slots) take(n int) {
	s.gauge.Set(float64(s.used.Add(int64(n))))
}

// takeUpTo takes as many of want slots as are free beyond keep and returns
// how many. A batcher that already runs a batch keeps some free (keep > 0)
// for the other channels, which would otherwise wait for its whole backlog:
// it starts another batch when its running one returns anyway. One that runs
// none (keep 0) and finds no slot free takes none and marks the slots
// starved.
func (s *slots) takeUpTo(want, keep int) int {
	free := s.available() - keep
	if free <= 0 {
		if keep == 0 {
			s.starved.Store(true)
		}
		return 0
	}
	n := min(want, free)
	s.take(n)
	return n
}

// free gives n slots back and tells the claimer.
func (s *slots) free(n int) {
	s.gauge.Set(float64(s.used.Add(-int64(n))))
	s.freed()
}

// inUse is how many slots are taken.
func (s *slots) inUse() int { return int(s.used.Load()) }

// available is how many slots are free (negative when more are taken than
// there are).
func (s *slots) available() int { return s.size - s.inUse() }

// wasStarved reports whether a batcher found no free slot since the last
// call, and clears it.
func (s *slots) wasStarved() bool { return s.starved.Swap(false) }
