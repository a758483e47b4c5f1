// Package events is pgrelay's domain without I/O: the events recorded in the
// log (pgrelay.log, the event store), the statuses a notification goes
// through, and the fold that derives a status from events.
package events

import "time"

// Kind is the event column of pgrelay.log (one row per state change), and
// the outcome the Processor records for a claim. Go code names outcomes by
// these constants only; the store turns them into text for SQL.
type Kind string

// The events of pgrelay.log.
const (
	// Enqueued: the event was accepted (notify(), notify_many(), a direct
	// insert into pgrelay.queue), logged in the enqueuing transaction, only
	// for channels registered with p_publish_enqueued. Not written for a
	// retry's attempts, a deduplicated call or a retried dead letter.
	Enqueued Kind = "enqueued"
	// Succeeded: the handler ran and its outcome committed.
	Succeeded Kind = "succeeded"
	// Failed: the attempt failed and a retry is scheduled.
	Failed Kind = "failed"
	// GaveUp: the attempt failed and it was the last: the channel's
	// max_attempts when it was recorded (pgrelay._complete_outcomes decides,
	// never the Processor), or the handler said retrying cannot help.
	GaveUp Kind = "gave_up"
	// Expired: the event was past its expires_at when dispatched; not run.
	Expired Kind = "expired"
	// Deduplicated: a notify() call was absorbed by an identical pending row.
	Deduplicated Kind = "deduplicated"
	// Adopted: a dead node's pending row was taken over by a live node.
	Adopted Kind = "adopted"
	// Rescued: the claim of a Processor that died (or overran its lease) was
	// taken back; the event is pending again.
	Rescued Kind = "rescued"
	// Retried: an admin enqueued a dead letter (an event that ended gave_up
	// or expired) again (pgrelay.retry); the row is the new attempt chain's
	// first queue row, under the same origin_id.
	Retried Kind = "retried"
	// Discarded: an admin removed a dead letter for good (pgrelay.discard);
	// the row names the queue row that ended.
	Discarded Kind = "discarded"
	// Cancelled: the event was cancelled (pgrelay.cancel, or the
	// notification of an email event by pgrelay_notifier.cancel): ended
	// unrun while pending, delayed or retrying (its error names who
	// cancelled it), or after a running attempt that failed (its error is
	// the failure's). No retry, no dead letter.
	Cancelled Kind = "cancelled"
	// Snoozed: a Go handler returned Snooze(d): the event is due again
	// after d and no attempt was spent; its error reads
	// "snoozed until <RFC 3339 time, UTC>". Not terminal. As an outcome it
	// is recorded with pgrelay._snooze.
	Snoozed Kind = "snoozed"
	// Release is an outcome, never a row of pgrelay.log: the claim is given
	// back unrun (shutdown, a lost database connection), the event is
	// pending again and no attempt is counted.
	Release Kind = "release"
)

// LogKinds returns the events pgrelay.log records, as its log_event
// constraint lists them (Release is none of them).
func LogKinds() []Kind {
	return []Kind{Succeeded, Failed, GaveUp, Expired, Deduplicated, Adopted, Rescued, Retried, Discarded, Enqueued,
		Cancelled, Snoozed}
}

// Terminal reports whether the event ends the notification: its status.
// Retried and Discarded are not: they follow a terminal event (a retry's own
// events follow it; after a discard the status stays what it ended as), as
// pgrelay.status() reads them.
func (k Kind) Terminal() bool {
	switch k {
	case Succeeded, GaveUp, Expired, Deduplicated, Cancelled:
		return true
	}
	return false
}

// Admin reports whether the event records an admin's action (pgrelay.retry,
// pgrelay.discard): its error column holds the admin's note, not an error.
func (k Kind) Admin() bool { return k == Retried || k == Discarded }

// Note reports whether the event's error column holds a note rather than an
// error to classify: an admin's action, a snooze's due time, a cancel (whose
// text names who cancelled, or the failure that ended a cancelled attempt).
func (k Kind) Note() bool { return k.Admin() || k == Snoozed || k == Cancelled }

// LogEvent is one row of pgrelay.log.
type LogEvent struct {
	ID       int64     `json:"id"`
	QueueID  int64     `json:"queue_id"`
	OriginID int64     `json:"origin_id"`
	Channel  string    `json:"channel"`
	Attempt  int       `json:"attempt"`
	Event    Kind      `json:"event"`
	Error    *string   `json:"error"`
	Node     int       `json:"node"`
	At       time.Time `json:"at"`
	// Priority is the event's priority (notify()'s p_priority, or its
	// channel's default); 0, the default, is left out of the documents (the
	// log stores it as NULL).
	Priority int `json:"priority,omitempty"`
}

// Status is what pgrelay.status() returns for a notification.
type Status string

// The statuses of a notification.
const (
	StatusPending      Status = "pending"
	StatusInFlight     Status = "in_flight"
	StatusRetrying     Status = "retrying"
	StatusSucceeded    Status = "succeeded"
	StatusGaveUp       Status = "gave_up"
	StatusExpired      Status = "expired"
	StatusDeduplicated Status = "deduplicated"
	StatusCancelled    Status = "cancelled"
)

// Row is the part of a notification's current queue row the fold needs.
type Row struct {
	Attempt  int
	InFlight bool
}

// Fold derives a notification's status from its current queue row (nil when it
// has none) and its log events in log order. ok is false for a notification
// pgrelay knows nothing about. pgrelay.status() computes the same in SQL.
func Fold(row *Row, log []LogEvent) (s Status, ok bool) {
	if row != nil {
		switch {
		case row.InFlight:
			return StatusInFlight, true
		case row.Attempt > 1:
			return StatusRetrying, true
		default:
			return StatusPending, true
		}
	}
	for i := len(log) - 1; i >= 0; i-- {
		if log[i].Event.Terminal() {
			return Status(log[i].Event), true
		}
	}
	return "", false
}
