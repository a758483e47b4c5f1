package actors_test

import (
	"bytes"
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/binding/format"
	"github.com/cloudevents/sdk-go/v2/binding/spec"
	"github.com/nats-io/nats.go"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// natsBinaryMessage is a NATS message read as a CloudEvents binary-mode
// message: its "ce-" headers are the attributes, "content-type" the data's
// content type, and its data the event's. The CloudEvents SDK's released
// NATS bindings read structured mode only; this is the binary mode of the
// NATS protocol binding's working draft, with the SDK's own attribute
// table (spec) and event builder (binding.ToEvent).
type natsBinaryMessage struct {
	header  nats.Header
	data    []byte
	version spec.Version
}

var ceSpecs = spec.WithPrefixMatchExact(func(name string) string {
	if name == "datacontenttype" {
		return "content-type"
	}
	return "ce-" + name
}, "ce-")

func newNATSBinaryMessage(h nats.Header, data []byte) *natsBinaryMessage {
	return &natsBinaryMessage{header: h, data: data, version: ceSpecs.Version(h.Get("ce-specversion"))}
}

func (m *natsBinaryMessage) ReadEncoding() binding.Encoding {
	if m.version == nil {
		return binding.EncodingUnknown
	}
	return binding.EncodingBinary
}

func (m *natsBinaryMessage) ReadStructured(context.Context, binding.StructuredWriter) error {
	return binding.ErrNotStructured
}

func (m *natsBinaryMessage) ReadBinary(ctx context.Context, w binding.BinaryWriter) error {
	if m.version == nil {
		return binding.ErrNotBinary
	}
	for k, vs := range m.header {
		if attr := m.version.Attribute(k); attr != nil {
			if err := w.SetAttribute(attr, vs[0]); err != nil {
				return err
			}
		} else if ext, ok := strings.CutPrefix(k, "ce-"); ok {
			if err := w.SetExtension(ext, vs[0]); err != nil {
				return err
			}
		}
	}
	return w.SetData(bytes.NewReader(m.data))
}

// GetAttribute and GetExtension read one attribute (binding.MessageMetadataReader).
func (m *natsBinaryMessage) GetAttribute(k spec.Kind) (spec.Attribute, any) {
	attr := m.version.AttributeFromKind(k)
	if attr == nil {
		return nil, nil
	}
	if vs := m.header[attr.PrefixedName()]; len(vs) > 0 {
		return attr, vs[0]
	}
	return attr, nil
}

func (m *natsBinaryMessage) GetExtension(name string) any {
	if vs := m.header["ce-"+name]; len(vs) > 0 {
		return vs[0]
	}
	return nil
}

func (m *natsBinaryMessage) Finish(error) error { return nil }

var (
	_ binding.Message               = (*natsBinaryMessage)(nil)
	_ binding.MessageMetadataReader = (*natsBinaryMessage)(nil)
)

// Every status event is a CloudEvent in binary mode that CloudEvents' own Go
// SDK reads: id the document's id, source the installation (the cluster
// name of pgrelay.settings) and node, a namespaced type per event, the
// channel as subject, the time of the row, and the document as data.
func TestActorEventsCloudEvents(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(setEventSetting("cluster_name", "'eu-billing.prod'"))
	e.Exec(`SELECT pgrelay.register('ok', 'SELECT length($1)')`)
	e.Exec(`CREATE FUNCTION public.gw(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'payment gateway timed out'; END $$`)
	e.Exec(`SELECT pgrelay.register('gw', 'SELECT public.gw($1)', p_max_attempts := 1)`)
	e.Exec(`INSERT INTO pgrelay_notifier.status_events (notification_id, channel, status) VALUES (7, 'mail', 'sending')`)
	e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('ok', $1)`, payloads("ok", 20))
	e.Exec(`SELECT pgrelay.notify('gw', 'x')`)
	testenv.Eventually(t, time.Minute, "21 log events and a notifier status in the stream", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 21 && streamMsgs(js, "PGRELAY_EVENTS") == 22
	})
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "ce", "pgrelay.>", 22)
	require.Len(t, msgs, 22)

	types := map[string]int{}
	for _, m := range msgs {
		ev, err := binding.ToEvent(context.Background(), newNATSBinaryMessage(m.header, m.data))
		require.NoError(t, err, "%v", m.header)
		require.NoError(t, ev.Validate())
		require.Equal(t, cloudevents.VersionV1, ev.SpecVersion())
		require.Equal(t, strconv.FormatInt(m.id(), 10), ev.ID())
		require.Equal(t, m.msgID, ev.ID())
		require.Equal(t, "pgrelay://eu-billing.prod/node/0", ev.Source())
		require.Equal(t, m.doc["channel"], ev.Subject())
		require.Equal(t, cloudevents.ApplicationJSON, ev.DataContentType())
		require.Equal(t, m.data, ev.Data())
		at, err := time.Parse(time.RFC3339Nano, m.doc["at"].(string))
		require.NoError(t, err)
		require.True(t, at.Equal(ev.Time()), "ce-time %s, at %s", ev.Time(), at)
		types[ev.Type()]++

		parsed, err := pgrelay.ParseEvent(ev.Data())
		require.NoError(t, err)
		if parsed.Log != nil {
			require.Equal(t, "dev.pgrelay.event."+string(parsed.Log.Event), ev.Type())
		} else {
			require.Equal(t, "dev.pgrelay.notifier."+parsed.Notifier.Status, ev.Type())
		}
	}
	require.Equal(t, map[string]int{"dev.pgrelay.event.succeeded": 20, "dev.pgrelay.event.gave_up": 1,
		"dev.pgrelay.notifier.sending": 1}, types)

	// A bare binding.Message of the SDK's JSON format reads the same
	// document, structured, for tooling that wants the envelope.
	ev, err := binding.ToEvent(context.Background(), newNATSBinaryMessage(msgs[0].header, msgs[0].data))
	require.NoError(t, err)
	envelope, err := format.JSON.Marshal(ev)
	require.NoError(t, err)
	require.Contains(t, string(envelope), `"specversion":"1.0"`)
}

// The document schema is a database setting read each publishing round:
// set to 1 it publishes ids as numbers, set back to 2 as strings, without a
// restart. SQL that does not name a valid value is refused.
func TestActorEventsSchemaSetting(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(setEventSetting("event_schema", "1"))
	e.Exec(`SELECT pgrelay.register('s', 'SELECT length($1)')`)
	e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('s', $1)`, payloads("a", 3))
	requireLogPublishedOnce(t, e, js, "s1", 3)
	e.Exec(setEventSetting("event_schema", "2"))
	e.Exec(`SELECT pgrelay.notify_many('s', $1)`, payloads("b", 3))
	requireLogPublishedOnce(t, e, js, "s2", 6)
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "s3", "pgrelay.events.>", 6)
	require.Len(t, msgs, 6)
	for i, m := range msgs {
		want := "1"
		if i >= 3 {
			want = "2"
		}
		require.Equal(t, want, m.doc["schema"].(interface{ String() string }).String(), "%s", m.data)
		ev, err := pgrelay.ParseEvent(m.data)
		require.NoError(t, err)
		require.Equal(t, m.id(), ev.Log.ID)
		if i < 3 {
			require.NotContains(t, string(m.data), `"origin_id":"`)
		} else {
			require.Contains(t, string(m.data), `"origin_id":"`+strconv.FormatInt(ev.Log.OriginID, 10)+`"`)
		}
	}

	for _, bad := range [][2]string{{"event_schema", "3"}, {"cluster_name", "''"}, {"cluster_name", "'a b'"},
		{"cluster_name", "'" + strings.Repeat("x", 64) + "'"}, {"cluster_name", "'-x'"}} {
		_, err := e.Pool.Exec(context.Background(), setEventSetting(bad[0], bad[1]))
		require.Error(t, err, bad)
	}
	_, err := e.Pool.Exec(context.Background(), `INSERT INTO pgrelay.settings (singleton, cluster_name) VALUES (false, 'x')`)
	require.Error(t, err, "one row")
}

// Error classes on NATS come from the SQLSTATE before the text: an
// exception whose message says "timed out" is sqlstate_P0001, not timeout.
// An admin's retry or discard of the dead letter carries no error_class.
func TestActorEventsErrorClassBySQLSTATE(t *testing.T) {
	t.Parallel()
	n := startNATS(t, devenv.NATSConfig{})
	_, js := natsClient(t, n.URL())
	e := newEnv(t)
	e.Exec(`CREATE FUNCTION public.gw(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'payment gateway timed out'; END $$`)
	e.Exec(`SELECT pgrelay.register('gw', 'SELECT public.gw($1)', p_max_attempts := 1)`)
	e.startProcessor(withNATS(n.URL()))
	e.Exec(`SELECT pgrelay.notify_many('gw', ARRAY['a', 'b'])`)
	testenv.Eventually(t, time.Minute, "two dead letters", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.dead_letters`) == 2
	})
	ids := e.IDs(`SELECT id FROM pgrelay.dead_letters ORDER BY id`)
	e.Exec(`SELECT pgrelay.retry($1)`, ids[0])
	e.Exec(`SELECT pgrelay.discard($1)`, ids[1])
	testenv.Eventually(t, time.Minute, "the retried event to give up again", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'`) == 3
	})
	requireLogPublishedOnce(t, e, js, "gw", 5)
	msgs := consumeAll(t, js, "PGRELAY_EVENTS", "gw2", "pgrelay.events.>", 5)
	kinds := map[string]int{}
	for _, m := range msgs {
		ev := m.doc["event"].(string)
		kinds[ev]++
		switch ev {
		case "gave_up":
			require.Equal(t, "sqlstate_P0001", m.doc["error_class"], "%s", m.data)
		case "retried", "discarded":
			require.NotContains(t, m.doc, "error_class", "%s", m.data)
		default:
			t.Fatalf("unexpected %s", m.data)
		}
	}
	require.Equal(t, map[string]int{"gave_up": 3, "retried": 1, "discarded": 1}, kinds)
}

// setEventSetting is the statement an admin sends to set a column of
// pgrelay.settings to the SQL value v, whether or not the row exists yet
// (docs/events.md).
func setEventSetting(column, v string) string {
	return `INSERT INTO pgrelay.settings (` + column + `) VALUES (` + v + `)
	  ON CONFLICT (singleton) DO UPDATE SET ` + column + ` = excluded.` + column + `, updated_at = now()`
}
