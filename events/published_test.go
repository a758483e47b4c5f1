package events_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
)

func TestSubjects(t *testing.T) {
	require.Equal(t, "pgrelay.events.orders.succeeded", events.EventSubject("orders", events.Succeeded))
	require.Equal(t, "pgrelay.notifier.mail.sent", events.NotifierSubject("mail", "sent"))
	// Whatever a name holds, it stays one token.
	require.Equal(t, "pgrelay.events.a_b_c_d.gave_up", events.EventSubject("a.b*c>d", events.GaveUp))
	require.Equal(t, "pgrelay.notifier._.x_y", events.NotifierSubject("", "x y"))
	require.Equal(t, "pgrelay.events.*.*", events.FilterSubject(events.EventsPrefix, "", ""))
	require.Equal(t, "pgrelay.events.orders.*", events.FilterSubject(events.EventsPrefix, "orders", ""))
	require.Equal(t, "pgrelay.notifier.*.sent", events.FilterSubject(events.NotifierPrefix, "", "sent"))
	for s, ok := range map[string]bool{"orders.created": true, "a": true, "a-b_c.D1": true, "": false,
		"a..b": false, ".a": false, "a.": false, "a.*": false, "a.>": false, "a b": false, "a\tb": false} {
		require.Equal(t, ok, events.ValidSubject(s), "%q", s)
	}
}

// A nats channel's subject: a literal subject outside pgrelay's own
// namespace and outside those NATS keeps for itself ($-prefixed: $JS.API,
// $KV, $O, $SYS, ...; and the reply inboxes _INBOX.). pgrelay._check_channel
// applies the same rule (migrations/sql_events_test.go checks they agree).
func TestCheckChannelSubject(t *testing.T) {
	for _, s := range []string{"orders.created", "a", "pgrelay", "app.pgrelay.x", "PGRELAY.x", "app.$JS.x",
		"JS.API.x", "js.api.x", "_INBOXES.x", "x._INBOX.y", "INBOX.x", "_inbox.x", "caf\u00e9.\u00a0"} {
		require.NoError(t, events.CheckChannelSubject(s), "%q", s)
	}
	for s, want := range map[string]string{
		"":                             "not a valid NATS subject",
		"orders.*":                     "not a valid NATS subject",
		"a b":                          "not a valid NATS subject",
		"pgrelay.x":                    `under "pgrelay."`,
		"pgrelay.events.c.sent":        `under "pgrelay."`,
		"$JS.API.STREAM.DELETE.EVENTS": "reserved",
		"$JS.ACK.x":                    "reserved",
		"$KV.config.key":               "reserved",
		"$O.bucket.x":                  "reserved",
		"$SYS.REQ.SERVER.PING":         "reserved",
		"$SRV.PING":                    "reserved",
		"$G":                           "reserved",
		"$":                            "reserved",
		"$js.api.x":                    "reserved",
		"_INBOX.abc":                   "reserved",
		"_INBOX":                       "reserved",
	} {
		err := events.CheckChannelSubject(s)
		require.Error(t, err, "%q", s)
		require.Contains(t, err.Error(), want, "%q", s)
	}
}

func TestPublishedJSON(t *testing.T) {
	at := time.Date(2026, 5, 4, 10, 0, 0, 123456000, time.FixedZone("x", 3600))
	e := events.LogEvent{ID: 1 << 60, QueueID: 2, OriginID: 3, Channel: "orders", Attempt: 1,
		Event: events.Succeeded, Node: 7, At: at}
	var doc map[string]any
	require.NoError(t, json.Unmarshal(mustFit(t, events.NewPublished(e, nil), 0), &doc))
	require.Equal(t, map[string]any{"schema": 2.0, "id": "1152921504606846976", "queue_id": "2", "origin_id": "3",
		"channel": "orders", "attempt": 1.0, "event": "succeeded", "error": nil, "node": 7.0,
		"at": "2026-05-04T09:00:00.123456Z"}, doc)

	v1 := events.NewPublished(e, nil)
	v1.Schema = events.SchemaNumericIDs
	require.JSONEq(t, `{"schema": 1, "id": 1152921504606846976, "queue_id": 2, "origin_id": 3,
		"channel": "orders", "attempt": 1, "event": "succeeded", "error": null, "node": 7,
		"at": "2026-05-04T09:00:00.123456Z"}`, string(mustFit(t, v1, 0)))
	require.Equal(t, "pgrelay.events.orders.succeeded", events.NewPublished(e, nil).Subject())

	p := "secret"
	require.Contains(t, string(mustFit(t, events.NewPublished(e, &p), 0)), `"payload":"secret"`)
}

func mustFit(t *testing.T, p events.Published, limit int) []byte {
	t.Helper()
	b, _, ok := events.Fit(p, limit)
	require.True(t, ok)
	return b
}

// Each schema reads its own form of ids, exactly (2^63-1 survives), and
// refuses the other's.
func TestPublishedIDsBySchema(t *testing.T) {
	t.Parallel()
	e := events.LogEvent{ID: 1<<63 - 1, QueueID: 122565803450040321, OriginID: 122565803450040320,
		Channel: "c", Attempt: 1, Event: events.Failed, At: time.Now().UTC()}
	for _, schema := range []int{events.SchemaNumericIDs, events.SchemaStringIDs} {
		p := events.NewPublished(e, nil)
		p.Schema = schema
		b, err := json.Marshal(p)
		require.NoError(t, err)
		var got events.Published
		require.NoError(t, json.Unmarshal(b, &got), "%s", b)
		require.Equal(t, p, got)
		n := events.NotifierStatus{Schema: schema, ID: 1<<63 - 1, NotificationID: 122565803450040321,
			Channel: "m", Status: "sent", At: e.At}
		b, err = json.Marshal(n)
		require.NoError(t, err)
		if schema == events.SchemaStringIDs {
			require.Contains(t, string(b), `"notification_id":"122565803450040321"`)
		} else {
			require.Contains(t, string(b), `"notification_id":122565803450040321`)
		}
		var gotN events.NotifierStatus
		require.NoError(t, json.Unmarshal(b, &gotN), "%s", b)
		require.Equal(t, n, gotN)
	}
	var p events.Published
	require.Error(t, json.Unmarshal([]byte(`{"schema": 2, "id": 5, "origin_id": "5"}`), &p))
	require.Error(t, json.Unmarshal([]byte(`{"schema": 1, "id": "5", "origin_id": 5}`), &p))
	require.Error(t, json.Unmarshal([]byte(`{"schema": 2, "id": "5x", "origin_id": "5"}`), &p))
	for raw, want := range map[string]int64{`"122565803450040321"`: 122565803450040321, `122565803450040321`: 122565803450040321} {
		got, err := events.ParseID(json.RawMessage(raw))
		require.NoError(t, err)
		require.Equal(t, want, got)
	}
}

// Fit drops the payload first, then cuts the error, and says so.
func TestFit(t *testing.T) {
	big := strings.Repeat("p", 5000)
	msg := strings.Repeat(`"é"`, 2000) // escapes and multi-byte runes
	doc := events.NewPublished(events.LogEvent{ID: 1, Channel: "c", Event: events.Failed, Error: &msg, At: time.Now()}, &big)

	b, shrunk, ok := events.Fit(doc, 100000)
	require.True(t, ok)
	require.False(t, shrunk)
	require.Contains(t, string(b), big)

	b, shrunk, ok = events.Fit(doc, 13000)
	require.True(t, ok)
	require.True(t, shrunk)
	require.LessOrEqual(t, len(b), 13000)
	var got events.Published
	require.NoError(t, json.Unmarshal(b, &got))
	require.Nil(t, got.Payload)
	require.True(t, got.PayloadOmitted)
	require.False(t, got.ErrorTruncated)
	require.Equal(t, msg, *got.Error)

	b, shrunk, ok = events.Fit(doc, 1000)
	require.True(t, ok)
	require.True(t, shrunk)
	require.LessOrEqual(t, len(b), 1000)
	require.NoError(t, json.Unmarshal(b, &got))
	require.True(t, got.ErrorTruncated)
	require.True(t, strings.HasPrefix(msg, *got.Error))
	require.NotEmpty(t, *got.Error)

	_, _, ok = events.Fit(doc, 50)
	require.False(t, ok, "not even the bare event fits")

	st := events.NotifierStatus{Schema: 1, ID: 9, NotificationID: 8, Channel: "m", Status: "failed", Error: &msg}
	b, shrunk, ok = events.FitNotifier(st, 500)
	require.True(t, ok)
	require.True(t, shrunk)
	require.LessOrEqual(t, len(b), 500)
	require.Equal(t, "pgrelay.notifier.m.failed", st.Subject())
}

// An ID reads as its millisecond, node and sequence parts.
func TestIDTime(t *testing.T) {
	at := time.Date(2026, 11, 30, 14, 37, 53, 461e6, time.UTC)
	ms := at.UnixMilli() - time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli()
	id := ms<<22 | 5<<12 | 77 // node 5, sequence 77
	require.Equal(t, at, events.ID(id).Time())
	require.Equal(t, 5, events.ID(id).Node())
	require.Equal(t, 77, events.ID(id).Seq())
	require.Equal(t, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), events.ID(0).Time())
	maxNode := ms<<22 | 1023<<12 | 4095
	require.Equal(t, at, events.ID(maxNode).Time())
	require.Equal(t, 1023, events.ID(maxNode).Node())
	require.Equal(t, 4095, events.ID(maxNode).Seq())
}
