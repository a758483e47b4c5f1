package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// The statements of the console (pgrelay web): reads only, each by an index
// (the log by its primary key, whose ids carry their creation time, or by
// origin_id; the queue as queue_stats() and status() read it), so that a page
// costs little however large the queue and the log are. The per-channel
// counts come from queue_stats() and the nodes from nodes_overview().
//
// Texts a producer or a handler wrote (payloads, errors, email recipients)
// come cut in SQL to the number of characters the page asks for (substr
// reads only the start of a long value), and lists of them are bounded in
// rows: whatever the database holds, a page reads and shows a bounded
// amount. Each takes chars, the most characters of each such text (0: the
// whole text), and pages ask one more than they show to know whether a
// text was cut.

// ErrNotFound means the channel, event or notification asked for does not
// exist (or no longer: the log is trimmed).
var ErrNotFound = errors.New("store: not found")

// ConsoleNode is a row of nodes_overview() with when the node's work was
// last adopted.
type ConsoleNode struct {
	NodeOverview
	// Adopted: a live node took the node's unrestricted rows since its last
	// heartbeat.
	Adopted bool
}

// ConsoleNodes returns the cluster's nodes as nodes_overview(deadAfter)
// shows them, with whether each one's work was adopted.
func ConsoleNodes(ctx context.Context, q Querier, deadAfter time.Duration) ([]ConsoleNode, error) {
	rows, err := q.Query(ctx, `SELECT o.node_id, o.mode, o.last_seen, o.alive, o.leader, o.processors, o.pending, o.pinned,
		COALESCE(o.hostname, ''), COALESCE(o.version, ''), o.decommissioned_at IS NOT NULL,
		COALESCE(n.adopted_at OPERATOR(pg_catalog.>=) n.last_seen, false)
		FROM pgrelay.nodes_overview($1::pg_catalog.interval) o
		JOIN pgrelay.nodes n ON n.node_id OPERATOR(pg_catalog.=) o.node_id
		ORDER BY o.node_id`, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("console: read the nodes: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ConsoleNode, error) {
		var n ConsoleNode
		err := r.Scan(&n.Node, &n.Mode, &n.LastSeen, &n.Alive, &n.Leader, &n.Processors, &n.Pending, &n.Pinned,
			&n.Hostname, &n.Version, &n.Decommissioned, &n.Adopted)
		return n, err
	})
	if err != nil {
		return nil, fmt.Errorf("console: read the nodes: %w", err)
	}
	return out, nil
}

// ProcessorRow is one running Processor instance (pgrelay.processors).
type ProcessorRow struct {
	ID        int64
	Node      int
	Mode      string
	Hostname  string
	PID       int
	Version   string
	StartedAt time.Time
	LastSeen  time.Time
	// Alive: its last heartbeat is more recent than the deadAfter given to
	// Processors (by the database's clock).
	Alive bool
}

// Processors returns the Processor instances that have not stopped (a dead
// one stays until it is rescued), by node; one silent for deadAfter is not
// Alive.
func Processors(ctx context.Context, q Querier, deadAfter time.Duration) ([]ProcessorRow, error) {
	rows, err := q.Query(ctx, `SELECT p.processor_id, p.node_id, p.mode, COALESCE(p.hostname, ''),
		COALESCE(p.pid, 0), COALESCE(p.version, ''), p.started_at, p.last_seen,
		p.last_seen OPERATOR(pg_catalog.>) (pg_catalog.now() OPERATOR(pg_catalog.-) $1::pg_catalog.interval)
		FROM pgrelay.processors p ORDER BY p.node_id, p.processor_id`, deadAfter)
	if err != nil {
		return nil, fmt.Errorf("console: read the processors: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (ProcessorRow, error) {
		var p ProcessorRow
		err := r.Scan(&p.ID, &p.Node, &p.Mode, &p.Hostname, &p.PID, &p.Version, &p.StartedAt, &p.LastSeen, &p.Alive)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("console: read the processors: %w", err)
	}
	return out, nil
}

// MinuteCounts is one channel's ended attempts in one minute of the log.
type MinuteCounts struct {
	Channel   string
	Minute    time.Time // the minute's start
	Succeeded int64
	// Failed counts the attempts that failed: retried (failed), the last
	// (gave_up) and those that expired before they ran.
	Failed int64
	// Cancelled and Snoozed count those log events.
	Cancelled, Snoozed int64
}

// LogPerMinute counts the log's succeeded, failed, cancelled and snoozed
// attempts per channel and minute from since on. It reads the log's rows by their ids (an id carries
// its creation time: _id_floor), so only the rows since then.
func LogPerMinute(ctx context.Context, q Querier, since time.Time) ([]MinuteCounts, error) {
	rows, err := q.Query(ctx, `SELECT l.channel, pg_catalog.date_trunc('minute'::pg_catalog.text, l.at) AS minute,
		pg_catalog.count(*) FILTER (WHERE l.event OPERATOR(pg_catalog.=) 'succeeded'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE l.event OPERATOR(pg_catalog.=) ANY ('{failed,gave_up,expired}'::pg_catalog.text[])),
		pg_catalog.count(*) FILTER (WHERE l.event OPERATOR(pg_catalog.=) 'cancelled'::pg_catalog.text),
		pg_catalog.count(*) FILTER (WHERE l.event OPERATOR(pg_catalog.=) 'snoozed'::pg_catalog.text)
		FROM pgrelay.log l
		WHERE l.id OPERATOR(pg_catalog.>=) pgrelay._id_floor($1::pg_catalog.timestamptz)
		  AND l.at OPERATOR(pg_catalog.>=) $1::pg_catalog.timestamptz
		GROUP BY 1, 2`, since)
	if err != nil {
		return nil, fmt.Errorf("console: count the log per minute since %s: %w", since.Format(time.RFC3339), err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (MinuteCounts, error) {
		var m MinuteCounts
		err := r.Scan(&m.Channel, &m.Minute, &m.Succeeded, &m.Failed, &m.Cancelled, &m.Snoozed)
		return m, err
	})
	if err != nil {
		return nil, fmt.Errorf("console: count the log per minute since %s: %w", since.Format(time.RFC3339), err)
	}
	return out, nil
}

// cut is the SQL of column expr cut to $n characters (the whole of it when
// $n is 0).
func cut(expr, n string) string {
	return `CASE WHEN ` + n + `::pg_catalog.int4 OPERATOR(pg_catalog.>) 0 THEN pg_catalog.substr(` + expr +
		`, 1, ` + n + `::pg_catalog.int4) ELSE ` + expr + ` END`
}

// ChannelSettings is one row of pgrelay.channels.
type ChannelSettings struct {
	Channel        string
	Kind           string
	Handler        string
	Mode           string
	Deduplicate    bool
	NodeRestricted bool
	MaxAttempts    int
	RetryDelay     time.Duration
	ExpireAfter    *time.Duration
	Timeout        time.Duration
	Paused         bool
	PublishPayload bool
	PublishErrors  string
	CreatedAt      time.Time
	UpdatedAt      time.Time
	// Flow control: the default priority of the channel's events, its
	// max_in_flight and its rate limit (RateLimit starts per RatePeriod);
	// nil: no limit.
	Priority    int
	MaxInFlight *int
	RateLimit   *int
	RatePeriod  *time.Duration
}

// Channel returns channel's settings (the handler cut to chars),
// ErrNotFound when it is not registered.
func Channel(ctx context.Context, q Querier, channel string, chars int) (ChannelSettings, error) {
	var c ChannelSettings
	err := q.QueryRow(ctx, `SELECT c.channel, c.kind, `+cut("c.handler", "$2")+`, c.concurrency_mode, c.deduplicate, c.node_restricted,
		c.max_attempts, c.retry_delay, c.expire_after, c.timeout, c.paused, c.publish_payload, c.publish_errors,
		c.created_at, c.updated_at, c.priority, c.max_in_flight, c.rate_limit, c.rate_period
		FROM pgrelay.channels c WHERE c.channel OPERATOR(pg_catalog.=) $1::pg_catalog.text`, channel, chars).Scan(
		&c.Channel, &c.Kind, &c.Handler, &c.Mode, &c.Deduplicate, &c.NodeRestricted, &c.MaxAttempts, &c.RetryDelay,
		&c.ExpireAfter, &c.Timeout, &c.Paused, &c.PublishPayload, &c.PublishErrors, &c.CreatedAt, &c.UpdatedAt,
		&c.Priority, &c.MaxInFlight, &c.RateLimit, &c.RatePeriod)
	if errors.Is(err, pgx.ErrNoRows) {
		return c, fmt.Errorf("channel %q: %w", channel, ErrNotFound)
	}
	if err != nil {
		return c, fmt.Errorf("console: read channel %q: %w", channel, err)
	}
	return c, nil
}

// ChannelNames returns the registered channels' names in order.
func ChannelNames(ctx context.Context, q Querier) ([]string, error) {
	rows, err := q.Query(ctx, `SELECT c.channel FROM pgrelay.channels c ORDER BY c.channel`)
	if err != nil {
		return nil, fmt.Errorf("console: list the channels: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("console: list the channels: %w", err)
	}
	return out, nil
}

// LogEntry is one row of pgrelay.log.
type LogEntry struct {
	ID       int64
	QueueID  int64
	OriginID int64
	Channel  string
	Attempt  int
	Event    string
	Error    string
	Node     int
	At       time.Time
}

// logColumns are a log row's columns, its error cut to $n characters.
func logColumns(n string) string {
	return `l.id, l.queue_id, l.origin_id, l.channel, l.attempt, l.event, COALESCE(` + cut("l.error", n) +
		`, ''), l.node, l.at`
}

func collectLog(rows pgx.Rows) ([]LogEntry, error) {
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (LogEntry, error) {
		var e LogEntry
		err := r.Scan(&e.ID, &e.QueueID, &e.OriginID, &e.Channel, &e.Attempt, &e.Event, &e.Error, &e.Node, &e.At)
		return e, err
	})
}

// RecentSetbacks returns channel's latest attempts that did not succeed
// (failed, gave_up, expired) or were put off or ended (snoozed, cancelled)
// since since, newest first, at most limit, each error (a snooze's due time,
// a cancel's reason) cut to chars. It reads the log backwards by id from now
// down to since, nothing older.
func RecentSetbacks(ctx context.Context, q Querier, channel string, since time.Time, limit, chars int) ([]LogEntry, error) {
	rows, err := q.Query(ctx, `SELECT `+logColumns("$4")+` FROM pgrelay.log l
		WHERE l.id OPERATOR(pg_catalog.>=) pgrelay._id_floor($2::pg_catalog.timestamptz)
		  AND l.channel OPERATOR(pg_catalog.=) $1::pg_catalog.text
		  AND l.event OPERATOR(pg_catalog.=) ANY ('{failed,gave_up,expired,cancelled,snoozed}'::pg_catalog.text[])
		ORDER BY l.id DESC LIMIT $3::pg_catalog.int4`, channel, since, limit, chars)
	if err != nil {
		return nil, fmt.Errorf("console: read the recent setbacks of channel %q: %w", channel, err)
	}
	out, err := collectLog(rows)
	if err != nil {
		return nil, fmt.Errorf("console: read the recent setbacks of channel %q: %w", channel, err)
	}
	return out, nil
}

// EventHistory returns the latest limit log rows of the event origin (the
// id notify() returned), oldest first, each error cut to chars, and how many
// rows the log holds of it (an event may have had max_attempts attempts, up
// to 1 000).
func EventHistory(ctx context.Context, q Querier, origin int64, limit, chars int) ([]LogEntry, int64, error) {
	var total int64
	if err := q.QueryRow(ctx, `SELECT pg_catalog.count(*) FROM pgrelay.log l
		WHERE l.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8`, origin).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("console: count the history of event %d: %w", origin, err)
	}
	rows, err := q.Query(ctx, `SELECT * FROM (SELECT `+logColumns("$3")+` FROM pgrelay.log l
		WHERE l.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 ORDER BY l.id DESC LIMIT $2::pg_catalog.int4) h
		ORDER BY h.id`, origin, limit, chars)
	if err != nil {
		return nil, 0, fmt.Errorf("console: read the history of event %d: %w", origin, err)
	}
	out, err := collectLog(rows)
	if err != nil {
		return nil, 0, fmt.Errorf("console: read the history of event %d: %w", origin, err)
	}
	return out, total, nil
}

// LastError is the error of an event's latest log row that has one.
type LastError struct {
	LogID int64
	Text  string // cut to the characters asked for
	Bytes int64  // the whole error's length
}

// EventLastError returns the error of event origin's latest log row with
// one, cut to chars; ok false when no row has one.
func EventLastError(ctx context.Context, q Querier, origin int64, chars int) (e LastError, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT l.id, `+cut("l.error", "$2")+`, pg_catalog.octet_length(l.error)
		FROM pgrelay.log l
		WHERE l.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND l.error IS NOT NULL
		ORDER BY l.id DESC LIMIT 1`, origin, chars).Scan(&e.LogID, &e.Text, &e.Bytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("console: read the last error of event %d: %w", origin, err)
	}
	return e, true, nil
}

// QueuedAttempt is an event's row in the queue: its attempt pending or in
// flight.
type QueuedAttempt struct {
	ID           int64
	Channel      string
	Attempt      int
	OwnerNode    int
	RunInNode    *int
	EnqueuedAt   time.Time
	NotBefore    time.Time
	ExpiresAt    *time.Time
	DispatchedAt *time.Time
	DispatchedBy *int64
	// Snoozes counts the event's snoozes (a Go handler's Snooze), which
	// spend no attempt; CancelRequested: pgrelay.cancel() asked to cancel
	// it while it ran (a failure of this attempt ends it cancelled).
	Snoozes         int
	CancelRequested bool
}

// EventQueued returns the queue rows of event origin (its first attempt's row
// by the primary key, its retries' by queue_retry_origin, as status() finds
// them), the latest attempt first; EventPayload reads the payload.
func EventQueued(ctx context.Context, q Querier, origin int64) ([]QueuedAttempt, error) {
	rows, err := q.Query(ctx, `SELECT q.id, q.channel, q.attempt, q.owner_node, q.run_in_node, q.enqueued_at,
		q.not_before, q.expires_at, q.dispatched_at, q.dispatched_by, q.snoozes,
		EXISTS (SELECT FROM pgrelay.cancels k WHERE k.origin_id OPERATOR(pg_catalog.=) q.origin_id)
		FROM pgrelay.queue q
		WHERE (q.id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND q.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8)
		   OR (q.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND q.retry_of IS NOT NULL)
		ORDER BY q.attempt DESC`, origin)
	if err != nil {
		return nil, fmt.Errorf("console: read the queue rows of event %d: %w", origin, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (QueuedAttempt, error) {
		var a QueuedAttempt
		err := r.Scan(&a.ID, &a.Channel, &a.Attempt, &a.OwnerNode, &a.RunInNode, &a.EnqueuedAt,
			&a.NotBefore, &a.ExpiresAt, &a.DispatchedAt, &a.DispatchedBy, &a.Snoozes, &a.CancelRequested)
		return a, err
	})
	if err != nil {
		return nil, fmt.Errorf("console: read the queue rows of event %d: %w", origin, err)
	}
	return out, nil
}

// EventStatus returns pgrelay.status(origin): pending, retrying, in_flight,
// succeeded, gave_up, expired, deduplicated or cancelled; "" when neither the queue nor
// the log knows the event.
func EventStatus(ctx context.Context, q Querier, origin int64) (string, error) {
	var s *string
	if err := q.QueryRow(ctx, "SELECT pgrelay.status($1::pg_catalog.int8)", origin).Scan(&s); err != nil {
		return "", fmt.Errorf("console: status of event %d: %w", origin, err)
	}
	if s == nil {
		return "", nil
	}
	return *s, nil
}

// Payload is an event's payload where the console finds it.
type Payload struct {
	Text  string // cut to the characters asked for
	Bytes int64  // the whole payload's length
	From  string // "the queue", "the dead letters" or "event_payloads"
}

// EventPayload returns event origin's payload, cut to chars, from where it
// is kept: its latest queue row, else its latest dead letter, else
// event_payloads (channels with publish_payload keep them until the log's
// retention); ok false when none keeps it. Each is read by an index: the
// queue's as EventQueued, the dead letters' by origin_id, event_payloads'
// by the queue ids of the event's log rows.
func EventPayload(ctx context.Context, q Querier, origin int64, chars int) (p Payload, ok bool, err error) {
	err = q.QueryRow(ctx, `SELECT `+cut("x.payload", "$2")+`, pg_catalog.octet_length(x.payload), x.src FROM (
		  (SELECT q.payload, 1 AS o, 'the queue'::pg_catalog.text AS src FROM pgrelay.queue q
		    WHERE (q.id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND q.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8)
		       OR (q.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 AND q.retry_of IS NOT NULL)
		    ORDER BY q.attempt DESC LIMIT 1)
		  UNION ALL
		  (SELECT d.payload, 2, 'the dead letters'::pg_catalog.text FROM pgrelay.dead_letters d
		    WHERE d.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 ORDER BY d.id DESC LIMIT 1)
		  UNION ALL
		  (SELECT p.payload, 3, 'event_payloads'::pg_catalog.text FROM pgrelay.event_payloads p
		    WHERE p.queue_id OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT l.queue_id FROM pgrelay.log l
		            WHERE l.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8))
		    ORDER BY p.queue_id DESC LIMIT 1)
		) x ORDER BY x.o LIMIT 1`, origin, chars).Scan(&p.Text, &p.Bytes, &p.From)
	if errors.Is(err, pgx.ErrNoRows) {
		return p, false, nil
	}
	if err != nil {
		return p, false, fmt.Errorf("console: read the payload of event %d: %w", origin, err)
	}
	return p, true, nil
}

// NotificationRow is a notification's envelope and state (no body).
type NotificationRow struct {
	ID      int64
	Channel string
	// To is the recipients joined by ", " (cut to the characters asked
	// for); Recipients how many there are.
	To           string
	Recipients   int
	Subject      string
	Status       string
	Attempts     int
	LastError    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	SentAt       *time.Time
	SendingEvent *int64
	SendInDoubt  bool
}

// notificationColumns are a notification's columns, its recipients,
// subject and last error cut to $n characters.
func notificationColumns(n string) string {
	return `n.notification_id, n.channel, ` + cut(`pg_catalog.array_to_string(n.to_addrs, ', '::pg_catalog.text)`, n) +
		`, pg_catalog.cardinality(n.to_addrs), ` + cut("n.subject", n) + `, n.status, n.attempts,
	COALESCE(` + cut("n.last_error", n) + `, ''), n.created_at, n.updated_at, n.sent_at, n.sending_event, n.send_in_doubt`
}

func scanNotification(r pgx.Row) (NotificationRow, error) {
	var n NotificationRow
	err := r.Scan(&n.ID, &n.Channel, &n.To, &n.Recipients, &n.Subject, &n.Status, &n.Attempts, &n.LastError,
		&n.CreatedAt, &n.UpdatedAt, &n.SentAt, &n.SendingEvent, &n.SendInDoubt)
	return n, err
}

// RecentNotifications returns the latest notifications, newest first, at
// most limit (by the primary key: ids carry their creation time), their
// texts cut to chars.
func RecentNotifications(ctx context.Context, q Querier, limit, chars int) ([]NotificationRow, error) {
	rows, err := q.Query(ctx, `SELECT `+notificationColumns("$2")+` FROM pgrelay_notifier.notifications n
		ORDER BY n.notification_id DESC LIMIT $1::pg_catalog.int4`, limit, chars)
	if err != nil {
		return nil, fmt.Errorf("console: read the latest notifications: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NotificationRow, error) { return scanNotification(r) })
	if err != nil {
		return nil, fmt.Errorf("console: read the latest notifications: %w", err)
	}
	return out, nil
}

// NotificationOf returns notification id, its texts cut to chars,
// ErrNotFound when there is none.
func NotificationOf(ctx context.Context, q Querier, id int64, chars int) (NotificationRow, error) {
	n, err := scanNotification(q.QueryRow(ctx, `SELECT `+notificationColumns("$2")+` FROM pgrelay_notifier.notifications n
		WHERE n.notification_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8`, id, chars))
	if errors.Is(err, pgx.ErrNoRows) {
		return n, fmt.Errorf("notification %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return n, fmt.Errorf("console: read notification %d: %w", id, err)
	}
	return n, nil
}

// NotificationEvent is one of a notification's status changes, or a note of
// its debug log (Status "").
type NotificationEvent struct {
	ID      int64
	Status  string
	Message string // the status change's error, or the debug note
	Node    *int
	At      time.Time
}

// NotificationHistory returns the latest limit of notification id's status
// events and debug notes, oldest first, each message cut to chars and each
// read by its notification's index, and how many there are.
func NotificationHistory(ctx context.Context, q Querier, id int64, limit, chars int) ([]NotificationEvent, int64, error) {
	var total int64
	if err := q.QueryRow(ctx, `SELECT (SELECT pg_catalog.count(*) FROM pgrelay_notifier.status_events s
		  WHERE s.notification_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8)
		+ (SELECT pg_catalog.count(*) FROM pgrelay_notifier.debug_log d
		  WHERE d.notification_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8)`, id).Scan(&total); err != nil {
		return nil, 0, fmt.Errorf("console: count the history of notification %d: %w", id, err)
	}
	rows, err := q.Query(ctx, `SELECT * FROM (
		  (SELECT s.id, s.status, COALESCE(`+cut("s.error", "$3")+`, ''), s.node, s.at
		    FROM pgrelay_notifier.status_events s WHERE s.notification_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8
		    ORDER BY s.id DESC LIMIT $2::pg_catalog.int4)
		  UNION ALL
		  (SELECT d.id, ''::pg_catalog.text, `+cut("d.message", "$3")+`, NULL::pg_catalog.int4, d.at
		    FROM pgrelay_notifier.debug_log d WHERE d.notification_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8
		    ORDER BY d.id DESC LIMIT $2::pg_catalog.int4)
		  ORDER BY 5 DESC, 1 DESC LIMIT $2::pg_catalog.int4) h
		ORDER BY 5, 1`, id, limit, chars)
	if err != nil {
		return nil, 0, fmt.Errorf("console: read the history of notification %d: %w", id, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (NotificationEvent, error) {
		var e NotificationEvent
		err := r.Scan(&e.ID, &e.Status, &e.Message, &e.Node, &e.At)
		return e, err
	})
	if err != nil {
		return nil, 0, fmt.Errorf("console: read the history of notification %d: %w", id, err)
	}
	return out, total, nil
}

// deadLetterColumnsCut are deadLetterColumns with the payload and the last
// error cut to $n characters.
func deadLetterColumnsCut(n string) string {
	return `d.id, d.origin_id, d.channel, ` + cut("d.payload", n) + `, d.attempts, ` + cut("d.last_error", n) +
		`, d.outcome, d.ended_at, d.node, d.run_in_node, d.notification_id, COALESCE(d.priority, 0::pg_catalog.int2)`
}

// ConsoleDeadLetters is DeadLetters with each payload and error cut to
// chars.
func ConsoleDeadLetters(ctx context.Context, q Querier, f DeadLetterFilter, limit, chars int) ([]DeadLetter, error) {
	channel, since := f.args()
	rows, err := q.Query(ctx, `SELECT `+deadLetterColumnsCut("$4")+` FROM pgrelay.dead_letters d
		WHERE ($1::pg_catalog.text IS NULL OR d.channel OPERATOR(pg_catalog.=) $1::pg_catalog.text)
		  AND ($2::pg_catalog.timestamptz IS NULL OR d.ended_at OPERATOR(pg_catalog.>=) $2::pg_catalog.timestamptz)
		ORDER BY d.ended_at DESC, d.id DESC
		LIMIT $3::pg_catalog.int8`, channel, since, int64(limit), chars)
	if err != nil {
		return nil, fmt.Errorf("console: list dead letters: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("console: list dead letters: %w", err)
	}
	return out, nil
}

// DeadLettersOf returns the latest limit dead letters of event origin, each
// payload and error cut to chars.
func DeadLettersOf(ctx context.Context, q Querier, origin int64, limit, chars int) ([]DeadLetter, error) {
	rows, err := q.Query(ctx, `SELECT `+deadLetterColumnsCut("$3")+` FROM pgrelay.dead_letters d
		WHERE d.origin_id OPERATOR(pg_catalog.=) $1::pg_catalog.int8 ORDER BY d.id DESC LIMIT $2::pg_catalog.int4`,
		origin, limit, chars)
	if err != nil {
		return nil, fmt.Errorf("console: read the dead letters of event %d: %w", origin, err)
	}
	out, err := pgx.CollectRows(rows, scanDeadLetter)
	if err != nil {
		return nil, fmt.Errorf("console: read the dead letters of event %d: %w", origin, err)
	}
	return out, nil
}

// DeadCountCap is where DeadLetterCounts stops counting a channel's dead
// letters: it reads at most this many entries of the channel's index, so
// that the overview's reading stays cheap every second.
const DeadCountCap = 10000

// DeadLetterCounts counts the dead letters of each registered channel that
// has some, up to DeadCountCap+1 (more than the cap).
func DeadLetterCounts(ctx context.Context, q Querier) (map[string]int64, error) {
	rows, err := q.Query(ctx, `SELECT c.channel, n.n FROM pgrelay.channels c,
		LATERAL (SELECT pg_catalog.count(*) AS n FROM (SELECT FROM pgrelay.dead_letters d
		          WHERE d.channel OPERATOR(pg_catalog.=) c.channel LIMIT $1::pg_catalog.int4) x) n
		WHERE n.n OPERATOR(pg_catalog.>) 0`, DeadCountCap+1)
	if err != nil {
		return nil, fmt.Errorf("console: count the dead letters per channel: %w", err)
	}
	out := map[string]int64{}
	var ch string
	var n int64
	if _, err := pgx.ForEachRow(rows, []any{&ch, &n}, func() error { out[ch] = n; return nil }); err != nil {
		return nil, fmt.Errorf("console: count the dead letters per channel: %w", err)
	}
	return out, nil
}
