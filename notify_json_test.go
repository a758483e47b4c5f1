package pgrelay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
)

type orderPlaced struct {
	OrderID int64    `json:"order_id"`
	Items   []string `json:"items"`
}

// NotifyJSON enqueues the value's JSON encoding, with Notify's options; a
// value that does not encode enqueues nothing, and its error names the type.
func TestNotifyJSON(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.exec(t, "SELECT pgrelay.register('orders', 'SELECT pg_catalog.length($1)')")

	id, err := pgrelay.NotifyJSON(bg, d.producer, "orders", orderPlaced{OrderID: 7, Items: []string{"tea"}},
		pgrelay.Delay(time.Hour))
	require.NoError(t, err)
	var payload string
	var later bool
	require.NoError(t, d.admin.QueryRow(bg,
		"SELECT payload, not_before > now() + interval '59 minutes' FROM pgrelay.queue WHERE origin_id = $1", id).
		Scan(&payload, &later))
	require.JSONEq(t, `{"order_id": 7, "items": ["tea"]}`, payload)
	require.True(t, later, "Delay applies")

	_, err = pgrelay.NotifyJSON(bg, d.producer, "orders", map[string]any{"f": func() {}})
	require.ErrorContains(t, err, `encode map[string]interface {} as JSON: json: unsupported type: func()`)
	var n int
	require.NoError(t, d.admin.QueryRow(bg, "SELECT count(*) FROM pgrelay.queue").Scan(&n))
	require.Equal(t, 1, n, "nothing enqueued")

	_, err = pgrelay.NotifyJSON(bg, d.producer, "no_such_channel", orderPlaced{})
	require.ErrorIs(t, err, pgrelay.ErrUnknownChannel)
}
