package store

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A batch's deadline adds up its handlers' timeouts (24 hours at most each,
// pgrelay._check_channel): however many events a batch holds (--sql-batch
// has no upper bound), the sum saturates instead of overflowing into a
// negative deadline that would fail the batch at once.
func TestBatchBudget(t *testing.T) {
	ev := func(n int, timeout time.Duration) []DirectEvent {
		out := make([]DirectEvent, n)
		for i := range out {
			out[i].Timeout = timeout
		}
		return out
	}
	require.Equal(t, directClaimTimeout, batchBudget(nil))
	require.Equal(t, directClaimTimeout+3*time.Second, batchBudget(ev(3, time.Second)))
	require.Equal(t, directClaimTimeout+500*24*time.Hour, batchBudget(ev(500, 24*time.Hour)))
	// 106 752 events of 24 hours exceed a time.Duration (about 292 years).
	big := batchBudget(ev(200_000, 24*time.Hour))
	require.Positive(t, big)
	require.GreaterOrEqual(t, big, 106_000*24*time.Hour)
}
