package pgrelay

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/pgrelay/pgrelay/events"
)

// LogDocument is the document of a log event, published on
// pgrelay.events.<channel>.<event>: a row of pgrelay.log (Event is
// enqueued, succeeded, failed, gave_up, expired, deduplicated, adopted,
// rescued, retried or discarded: events.LogKinds;
// OriginID is the id Notify returned), with its error class and, for
// channels that publish them, its payload. docs/events.md describes each
// field.
type LogDocument = events.Published

// NotifierDocument is the document of an email's status change, published
// on pgrelay.notifier.<channel>.<status>: NotificationID is the id Send
// returned, Status an EmailState.
type NotifierDocument = events.NotifierStatus

// SchemaVersion is the newest version of the status-event documents
// ParseEvent reads (their "schema" field). It reads every version up to it:
// schema 1 with ids as JSON numbers, schema 2 with ids as JSON strings.
const SchemaVersion = events.SchemaVersion

// Event is an event of pgrelay as a Go program sees it: either one handed
// to a Go handler (Handle, HandleTx: ID, OriginID, Channel, Payload and
// Attempt are set, Log and Notifier nil), or a status-event document from
// NATS decoded by ParseEvent (exactly one of Log and Notifier set, the
// others zero).
type Event struct {
	Log      *LogDocument
	Notifier *NotifierDocument

	// ID is the queue row of this attempt: each retry is a row of its own.
	ID int64
	// OriginID is the id Notify returned, the same on every attempt: the
	// key to make a handler's effects idempotent.
	OriginID int64
	// Channel and Payload are what Notify was given.
	Channel string
	Payload string
	// Attempt counts from 1. MaxAttempts is the channel's max_attempts when
	// this attempt was claimed: a failure gives up at the value in force
	// when it is recorded (an update() meanwhile counts).
	Attempt     int
	MaxAttempts int
	// EnqueuedAt is when the event was first enqueued.
	EnqueuedAt time.Time
}

// ParseEvent decodes a status-event document pgrelay published on NATS (the
// data of a message under pgrelay.>), of schema 1 or 2. Fields it does not know are ignored, as
// later versions may add some. It returns an error matching
// ErrUnsupportedSchema for a document of a schema newer than SchemaVersion,
// and ErrMalformedEvent for anything that is not such a document.
func ParseEvent(data []byte) (Event, error) {
	var probe struct {
		Schema         *int            `json:"schema"`
		Event          *string         `json:"event"`
		NotificationID json.RawMessage `json:"notification_id"`
		Status         *string         `json:"status"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return Event{}, fmt.Errorf("pgrelay: parse event: %w: %w", ErrMalformedEvent, err)
	}
	switch {
	case probe.Schema == nil || *probe.Schema < 1:
		return Event{}, fmt.Errorf("pgrelay: parse event: %w: no schema version", ErrMalformedEvent)
	case *probe.Schema > SchemaVersion:
		return Event{}, fmt.Errorf("pgrelay: parse event: %w: version %d, this package reads up to %d", ErrUnsupportedSchema, *probe.Schema, SchemaVersion)
	}
	switch {
	case probe.Event != nil && probe.NotificationID == nil:
		var d LogDocument
		if err := json.Unmarshal(data, &d); err != nil {
			return Event{}, fmt.Errorf("pgrelay: parse event: %w: log event: %w", ErrMalformedEvent, err)
		}
		if d.ID == 0 || d.OriginID == 0 || d.Channel == "" || d.Event == "" {
			return Event{}, fmt.Errorf("pgrelay: parse event: %w: log event without id, origin_id, channel or event", ErrMalformedEvent)
		}
		return Event{Log: &d}, nil
	case probe.NotificationID != nil && probe.Status != nil && probe.Event == nil:
		var d NotifierDocument
		if err := json.Unmarshal(data, &d); err != nil {
			return Event{}, fmt.Errorf("pgrelay: parse event: %w: notifier status: %w", ErrMalformedEvent, err)
		}
		if d.ID == 0 || d.NotificationID == 0 || d.Channel == "" || d.Status == "" {
			return Event{}, fmt.Errorf("pgrelay: parse event: %w: notifier status without id, notification_id, channel or status", ErrMalformedEvent)
		}
		return Event{Notifier: &d}, nil
	}
	return Event{}, fmt.Errorf("pgrelay: parse event: %w: neither a log event nor a notifier status", ErrMalformedEvent)
}
