package pgrelay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/events"
)

// ParseEvent reads the documents of a cancelled and of a snoozed event: as
// docs/events.md shows them (schema 2, the note in "error", no error class)
// and as the publisher encodes them. cancelled ends the event; snoozed does
// not.
func TestParseEventCancelledAndSnoozed(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		data     string
		kind     events.Kind
		note     string
		terminal bool
	}{
		{`{"schema": 2, "id": "122565803450040330", "queue_id": "122565803450040322", "origin_id": "122565803450040322",
		   "channel": "orders", "attempt": 1, "event": "cancelled", "error": "cancelled by app", "node": 0,
		   "at": "2026-11-30T14:25:46.282113Z", "priority": 5}`, events.Cancelled, "cancelled by app", true},
		{`{"schema": 2, "id": "122565803450040331", "queue_id": "122565803450040322", "origin_id": "122565803450040322",
		   "channel": "orders", "attempt": 2, "event": "snoozed", "error": "snoozed until 2026-11-30T14:26:16.282113Z",
		   "node": 1, "at": "2026-11-30T14:25:46.282113Z"}`, events.Snoozed, "snoozed until 2026-11-30T14:26:16.282113Z", false},
	} {
		ev, err := pgrelay.ParseEvent([]byte(c.data))
		require.NoError(t, err, c.data)
		require.Nil(t, ev.Notifier)
		require.NotNil(t, ev.Log)
		require.Equal(t, c.kind, ev.Log.Event)
		require.Equal(t, int64(122565803450040322), ev.Log.OriginID)
		require.NotNil(t, ev.Log.Error)
		require.Equal(t, c.note, *ev.Log.Error)
		require.Empty(t, ev.Log.ErrorClass)
		require.Equal(t, c.terminal, ev.Log.Event.Terminal(), c.kind)
		require.Equal(t, "pgrelay.events.orders."+string(c.kind), ev.Log.Subject())
	}

	// As published, with the channel's publish_errors 'text' (the note
	// reaches NATS) and the default 'class' (it does not, and has no class).
	for _, kind := range []events.Kind{events.Cancelled, events.Snoozed} {
		for _, policy := range []string{events.ErrorsText, events.ErrorsClass} {
			text := "a note of " + string(kind)
			e := events.LogEvent{ID: 122565803450040340, QueueID: 122565803450040322, OriginID: 122565803450040322,
				Channel: "orders", Attempt: 3, Event: kind, Node: 2, Priority: -4,
				At: time.Date(2026, 11, 30, 14, 25, 46, 282113000, time.UTC)}
			doc := events.NewPublished(e, nil)
			doc.Error, doc.ErrorClass = events.PublishedNote(kind, &text, policy)
			data, _, ok := events.Fit(doc, 0)
			require.True(t, ok)
			ev, err := pgrelay.ParseEvent(data)
			require.NoError(t, err, string(data))
			require.Equal(t, &doc, ev.Log, "%s, %s", kind, policy)
			require.Empty(t, ev.Log.ErrorClass, "a note has no class")
			require.Equal(t, policy == events.ErrorsText, ev.Log.Error != nil, "%s, %s", kind, policy)
		}
	}
}
