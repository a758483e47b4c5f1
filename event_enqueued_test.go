package pgrelay_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/events"
)

// The document of an enqueued event, as the publisher encodes it, is a log
// event to ParseEvent: the event's ids, attempt 1, no error.
func TestParseEventEnqueued(t *testing.T) {
	t.Parallel()
	payload := `{"order": 42}`
	doc := events.NewPublished(events.LogEvent{
		ID: 120893035063017473, QueueID: 120893033301409793, OriginID: 120893033301409793,
		Channel: "orders", Attempt: 1, Event: events.Enqueued, Node: 2,
		At: time.Date(2026, 11, 30, 14, 25, 46, 282113000, time.UTC),
	}, &payload)
	data, _, ok := events.Fit(doc, 0)
	require.True(t, ok)
	require.Equal(t, "pgrelay.events.orders.enqueued", doc.Subject())
	ev, err := pgrelay.ParseEvent(data)
	require.NoError(t, err)
	require.Nil(t, ev.Notifier)
	require.Equal(t, &doc, ev.Log)
	require.Equal(t, events.Enqueued, ev.Log.Event)
	require.Equal(t, ev.Log.OriginID, ev.Log.QueueID)
	require.Empty(t, ev.Log.ErrorClass)
}
