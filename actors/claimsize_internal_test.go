package actors

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// A claim takes up to BatchSize rows when there is room. Without room it
// claims none, and runs only to report the channels ready for batches, when
// their rows may be ready: not at every end of a claimed event, which would
// be a claim per event while a busy Processor waits for claimAtLeast free
// slots (as the first version of the batch slots did).
func TestClaimSize(t *testing.T) {
	cfg := Config{Concurrency: 1000, BatchSize: 100} // claimAtLeast 100
	for _, c := range []struct {
		name                       string
		inUse, free                int
		anyFree, batches, forBatch bool
		n                          int
		run                        bool
	}{
		{"idle", 0, 1000, false, true, true, 100, true},
		{"idle, few slots", 0, 7, false, true, false, 7, true},
		{"busy, enough free", 900, 100, false, true, false, 100, true},
		{"busy, a poll", 990, 10, true, true, true, 10, true},
		{"busy, an event ended", 990, 10, false, true, false, 0, false},
		{"busy, a wake", 990, 10, false, true, true, 0, true},
		{"full, a batch slot freed", 1000, 0, false, true, true, 0, true},
		{"full, an event ended", 1000, 0, false, true, false, 0, false},
		{"full, a poll, no batches", 1000, 0, true, false, true, 0, false},
	} {
		n, run := claimSize(cfg, c.inUse, c.free, c.anyFree, c.batches, c.forBatch)
		require.Equal(t, c.n, n, c.name)
		require.Equal(t, c.run, run, c.name)
	}
}
