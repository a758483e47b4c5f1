package pgrelay_test

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/events"
)

// What the publisher encodes, ParseEvent decodes: a log event, with error
// class and payload, and a notifier status.
func TestParseEventRoundTrip(t *testing.T) {
	t.Parallel()
	errText, payload := "boom", `{"order": 42}`
	doc := events.NewPublished(events.LogEvent{
		ID: 120893035063017472, QueueID: 120893033301409793, OriginID: 120893033301409793,
		Channel: "orders", Attempt: 2, Event: events.Failed, Error: &errText, Node: 3,
		At: time.Date(2026, 11, 30, 14, 25, 46, 282113000, time.UTC),
	}, &payload)
	doc.ErrorClass = "sqlstate_P0001"
	data, _, ok := events.Fit(doc, 0)
	require.True(t, ok)
	ev, err := pgrelay.ParseEvent(data)
	require.NoError(t, err)
	require.Nil(t, ev.Notifier)
	require.Equal(t, &doc, ev.Log)

	st := events.NotifierStatus{Schema: events.SchemaVersion, ID: 120893174095806464,
		NotificationID: 120893170000000000, Channel: "welcome_mail", Status: string(pgrelay.EmailFailed),
		Node: 0, At: time.Date(2026, 11, 30, 14, 26, 20, 424000000, time.UTC), ErrorClass: "smtp_5xx"}
	data, _, ok = events.FitNotifier(st, 0)
	require.True(t, ok)
	ev, err = pgrelay.ParseEvent(data)
	require.NoError(t, err)
	require.Nil(t, ev.Log)
	require.Equal(t, &st, ev.Notifier)
}

// ParseEvent reads both schemas: ids as JSON numbers (1) and as strings
// (2), each exactly.
func TestParseEventBothSchemas(t *testing.T) {
	t.Parallel()
	v1 := `{"schema": 1, "id": 122565803450040321, "queue_id": 122565803450040323, "origin_id": 122565803450040322,
		"channel": "orders", "attempt": 1, "event": "succeeded", "error": null, "node": 0, "at": "2026-11-30T14:25:46.282113Z"}`
	v2 := `{"schema": 2, "id": "122565803450040321", "queue_id": "122565803450040323", "origin_id": "122565803450040322",
		"channel": "orders", "attempt": 1, "event": "succeeded", "error": null, "node": 0, "at": "2026-11-30T14:25:46.282113Z"}`
	for _, data := range []string{v1, v2} {
		ev, err := pgrelay.ParseEvent([]byte(data))
		require.NoError(t, err, data)
		require.Equal(t, int64(122565803450040321), ev.Log.ID)
		require.Equal(t, int64(122565803450040323), ev.Log.QueueID)
		require.Equal(t, int64(122565803450040322), ev.Log.OriginID)
	}
	n2 := `{"schema": 2, "id": "122565803450040330", "notification_id": "122565803450040331", "channel": "mail",
		"status": "sent", "error": null, "node": 0, "at": "2026-11-30T14:25:46.282113Z"}`
	ev, err := pgrelay.ParseEvent([]byte(n2))
	require.NoError(t, err)
	require.Equal(t, int64(122565803450040331), ev.Notifier.NotificationID)
	require.Equal(t, int64(122565803450040330), ev.Notifier.ID)
}

// Documents of a newer schema are refused as such; unknown fields are not.
func TestParseEventSchema(t *testing.T) {
	t.Parallel()
	base := map[string]any{"id": 1, "queue_id": 2, "origin_id": 2, "channel": "c", "attempt": 1,
		"event": "succeeded", "error": nil, "node": 0, "at": "2026-11-30T14:25:46.282113Z"}
	doc := func(extra map[string]any) []byte {
		m := map[string]any{}
		for k, v := range base {
			m[k] = v
		}
		for k, v := range extra {
			m[k] = v
		}
		b, err := json.Marshal(m)
		require.NoError(t, err)
		return b
	}
	ev, err := pgrelay.ParseEvent(doc(map[string]any{"schema": 1, "new_field": []int{1}}))
	require.NoError(t, err)
	require.Equal(t, events.Succeeded, ev.Log.Event)

	_, err = pgrelay.ParseEvent(doc(map[string]any{"schema": pgrelay.SchemaVersion + 1}))
	require.ErrorIs(t, err, pgrelay.ErrUnsupportedSchema)
	require.NotErrorIs(t, err, pgrelay.ErrMalformedEvent)
}

// Anything that is not one of the two documents is malformed.
func TestParseEventMalformed(t *testing.T) {
	t.Parallel()
	for _, data := range []string{
		``,
		`not json`,
		`[1, 2]`,
		`{}`,
		`{"order": 42}`, // a nats channel's payload, say
		`{"id": 1, "origin_id": 1, "channel": "c", "event": "succeeded"}`,                              // no schema
		`{"schema": 0, "id": 1, "origin_id": 1, "channel": "c", "event": "succeeded"}`,                 // schema 0
		`{"schema": 1, "id": 1, "origin_id": 1, "channel": "c"}`,                                       // neither kind
		`{"schema": 1, "id": 1, "origin_id": 1, "channel": "c", "event": ""}`,                          // empty event
		`{"schema": 1, "origin_id": 1, "channel": "c", "event": "succeeded"}`,                          // no id
		`{"schema": 1, "id": 1, "origin_id": 1, "event": "succeeded"}`,                                 // no channel
		`{"schema": 1, "id": "1", "origin_id": 1, "channel": "c", "event": "succeeded"}`,               // id of the wrong type
		`{"schema": 2, "id": 1, "origin_id": "1", "channel": "c", "event": "succeeded"}`,               // id of the wrong type
		`{"schema": 1, "id": 1, "notification_id": 2, "channel": "c", "status": "sent", "event": "x"}`, // both kinds
		`{"schema": 1, "id": 1, "notification_id": 2, "channel": "c"}`,                                 // no status
		`{"schema": 1, "id": 1, "notification_id": 2, "status": "sent"}`,                               // no channel
	} {
		_, err := pgrelay.ParseEvent([]byte(data))
		require.ErrorIs(t, err, pgrelay.ErrMalformedEvent, "%s", data)
	}
}
