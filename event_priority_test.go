package pgrelay_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
)

// ParseEvent reads an event's priority from documents of both schemas; a
// document without it is of priority 0.
func TestParseEventPriority(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		`{"schema": 1, "id": 122565803450040321, "queue_id": 122565803450040322, "origin_id": 122565803450040322,
		  "channel": "orders", "attempt": 1, "event": "enqueued", "error": null, "node": 0,
		  "at": "2026-11-30T14:25:46.282113Z", "priority": 5}`,
		`{"schema": 2, "id": "122565803450040321", "queue_id": "122565803450040322", "origin_id": "122565803450040322",
		  "channel": "orders", "attempt": 1, "event": "enqueued", "error": null, "node": 0,
		  "at": "2026-11-30T14:25:46.282113Z", "priority": 5}`,
	} {
		ev, err := pgrelay.ParseEvent([]byte(data))
		require.NoError(t, err, data)
		require.Equal(t, 5, ev.Log.Priority, data)
	}
	ev, err := pgrelay.ParseEvent([]byte(`{"schema": 2, "id": "1", "queue_id": "2", "origin_id": "2", "channel": "c",
		"attempt": 1, "event": "succeeded", "error": null, "node": 0, "at": "2026-11-30T14:25:46.282113Z"}`))
	require.NoError(t, err)
	require.Zero(t, ev.Log.Priority)
}
