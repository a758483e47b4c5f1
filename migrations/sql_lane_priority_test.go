package migrations_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// A lane batch takes the lanes by the priority of their heads, as a classic
// claim of a 'payload' channel does: heads above 0 first, highest first,
// across the serialised channels; then the others in turn; those below 0
// last, while there is room. A lane stays FIFO: an event of a higher
// priority behind a head of 0 waits for it.
func TestDirectClaimLanesByPriority(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	d.register("p", "p_concurrency_mode := 'payload'")
	d.register("c", "p_concurrency_mode := 'channel'")
	d.notify("p", "a")
	d.notify("p", "b")
	d.notifyPrio("p", "high", 5)
	d.notifyPrio("p", "low", -2)
	d.notifyPrio("c", "x", 3)
	d.notifyPrio("p", "a", 9) // behind lane a's head
	heads := func(limit int) []string {
		var got []string
		inTx(t, d.Conn(0), func(tx pgx.Tx) {
			got = testenv.Column[string](t, tx,
				`SELECT payload FROM pgrelay._claim_lanes_direct('single', false, NULL, $1, NULL, NULL)`, limit)
		})
		return got
	}
	got := heads(10)
	require.Len(t, got, 5, "one head per lane: %v", got)
	require.Equal(t, []string{"high", "x"}, got[:2])
	require.ElementsMatch(t, []string{"a", "b"}, got[2:4])
	require.Equal(t, "low", got[4])
	require.Equal(t, []string{"high", "x"}, heads(2))
	got = heads(4)
	require.ElementsMatch(t, []string{"high", "x", "a", "b"}, got, "no room for the head below 0")
	// After a walk that took only the lanes of 0, the heads above 0 come first again.
	after, lane := "p", int64(1<<62)
	inTx(t, d.Conn(0), func(tx pgx.Tx) {
		got = testenv.Column[string](t, tx,
			`SELECT payload FROM pgrelay._claim_lanes_direct('single', false, NULL, 3, $1, $2)`, after, lane)
	})
	require.Equal(t, []string{"high", "x"}, got[:2])
}
