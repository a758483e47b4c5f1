package actors

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A batch that comes back short says the channel has nothing more ready,
// unless a batch that ran beside it came back with more after it started:
// the short one may have found those rows held by the other (two lane
// batches over one lane: the second passes over the head the first holds,
// and comes back empty). Its answer then must not take away the credit the
// other gave: the batcher would stop with rows ready and no claim to tell
// it again (TestActorBatchersShareFewSlots stalled so in a clean-clone run,
// its poll an hour away).
func TestBatchCreditAfterABatch(t *testing.T) {
	t0 := time.Now()
	for _, c := range []struct {
		name        string
		credit      int
		full, again bool
		started     time.Time // the batch that came back
		moreAt      time.Time // the last batch that came back with more
		want        int
	}{
		{"full", 1, true, false, t0, time.Time{}, 3},
		{"full, capped", 3, true, false, t0, time.Time{}, 4},
		{"again", 0, false, true, t0, time.Time{}, 1},
		{"short, alone", 2, false, false, t0, time.Time{}, 0},
		{"short, another came back with more before it started", 1, false, false, t0, t0.Add(-time.Millisecond), 0},
		{"short, another came back with more while it ran", 1, false, false, t0, t0.Add(time.Millisecond), 1},
	} {
		got := creditAfter(c.credit, 4, c.full, c.again, c.started, c.moreAt)
		require.Equal(t, c.want, got, c.name)
	}
}
