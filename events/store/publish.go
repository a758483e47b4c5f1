package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/prcodes"
)

// The event publisher's SQL. It runs on the publisher's own connection (a
// *pgx.Conn it holds for its session-level lease), so these functions take a
// connection rather than using the pools.

// TryPublishLease takes the lease that makes this connection's session the
// only active publisher of node (several Processors may run per node);
// false when another live session holds it. It lasts as long as the
// session: a lease whose holder's session has ended (no backend with its
// pid, or one started at another time) is free. The lease is a row of
// pgrelay.publish_leases, which only pgrelay's roles can write, so no
// other login can take or hold it.
func TryPublishLease(ctx context.Context, c Querier, node int) (bool, error) {
	var ok bool
	err := c.QueryRow(ctx, `INSERT INTO pgrelay.publish_leases AS l (node_id, holder_pid, holder_start)
		SELECT $1::pg_catalog.int4, a.pid, a.backend_start
		  FROM pg_catalog.pg_stat_activity a WHERE a.pid OPERATOR(pg_catalog.=) pg_catalog.pg_backend_pid()
		ON CONFLICT (node_id) DO UPDATE
		   SET holder_pid = excluded.holder_pid, holder_start = excluded.holder_start, taken_at = pg_catalog.now()
		 WHERE (l.holder_pid OPERATOR(pg_catalog.=) excluded.holder_pid AND l.holder_start OPERATOR(pg_catalog.=) excluded.holder_start)
		    OR NOT EXISTS (
		         -- backend_start is NULL for another role's session unless
		         -- this role may read its statistics: the pid alone then.
		         SELECT FROM pg_catalog.pg_stat_activity a
		          WHERE a.pid OPERATOR(pg_catalog.=) l.holder_pid
		            AND (a.backend_start IS NULL OR a.backend_start OPERATOR(pg_catalog.=) l.holder_start))
		RETURNING true`, node).Scan(&ok)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("take the publisher lease of node %d: %w", node, err)
	}
	return ok, nil
}

// ThisNode is pgrelay._this_node() on c's session.
func ThisNode(ctx context.Context, c Querier) (int, error) {
	var n int32
	if err := c.QueryRow(ctx, "SELECT pgrelay._this_node()").Scan(&n); err != nil {
		return 0, fmt.Errorf("read this node's id: %w", err)
	}
	return int(n), nil
}

// NotifierEventsExist reports whether the notifier's status event table
// exists (the notifier's migration was applied).
func NotifierEventsExist(ctx context.Context, c Querier) (bool, error) {
	var ok bool
	if err := c.QueryRow(ctx, "SELECT pg_catalog.to_regclass('pgrelay_notifier.status_events'::pg_catalog.text) IS NOT NULL").Scan(&ok); err != nil {
		return false, fmt.Errorf("look for pgrelay_notifier.status_events: %w", err)
	}
	return ok, nil
}

// OpenCursor creates the cursor of (node, source) when missing (at 0: the
// whole retained log is published) and returns its position.
func OpenCursor(ctx context.Context, c Querier, node int, source string) (int64, error) {
	if _, err := c.Exec(ctx, `INSERT INTO pgrelay.publish_cursors (node_id, source) VALUES ($1::pg_catalog.int4, $2::pg_catalog.text)
		ON CONFLICT (node_id, source) DO NOTHING`, node, source); err != nil {
		return 0, fmt.Errorf("create the %s publish cursor of node %d: %w", source, node, err)
	}
	var last int64
	if err := c.QueryRow(ctx, `SELECT last_id FROM pgrelay.publish_cursors
		WHERE node_id OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND source OPERATOR(pg_catalog.=) $2::pg_catalog.text`,
		node, source).Scan(&last); err != nil {
		return 0, fmt.Errorf("read the %s publish cursor of node %d: %w", source, node, err)
	}
	return last, nil
}

// AdvanceCursor moves the cursor of (node, source) forward to id (never
// back) and returns its position.
func AdvanceCursor(ctx context.Context, c Querier, node int, source string, id int64) (int64, error) {
	var last int64
	err := c.QueryRow(ctx, `UPDATE pgrelay.publish_cursors
		SET last_id = GREATEST(last_id, $3::pg_catalog.int8), updated_at = pg_catalog.now()
		WHERE node_id OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND source OPERATOR(pg_catalog.=) $2::pg_catalog.text
		RETURNING last_id`, node, source, id).Scan(&last)
	if err != nil {
		return 0, fmt.Errorf("advance the %s publish cursor of node %d to %d: %w", source, node, id, err)
	}
	return last, nil
}

// PublishHorizon is pgrelay._publish_horizon(): every row with a smaller id
// is committed or gone. It must be read in a statement of its own, before
// the rows it bounds are read in another (a later snapshot).
func PublishHorizon(ctx context.Context, c Querier) (int64, error) {
	var h int64
	if err := c.QueryRow(ctx, "SELECT pgrelay._publish_horizon()").Scan(&h); err != nil {
		// PR040's hint is the GRANT that ends it: the log line carries it.
		if pe, ok := errors.AsType[*pgconn.PgError](err); ok && pe.Code == prcodes.PublishHorizonBlind && pe.Hint != "" {
			return 0, fmt.Errorf("compute the publish horizon: %w (fix: %s)", err, pe.Hint)
		}
		return 0, fmt.Errorf("compute the publish horizon: %w", err)
	}
	return h, nil
}

// EventSettings is pgrelay.settings: how the status events are published.
type EventSettings struct {
	// Schema is the document version (events.SchemaNumericIDs or
	// events.SchemaStringIDs).
	Schema int
	// Cluster names the installation in the CloudEvents source.
	Cluster string
}

// PublishSettings reads the settings in force (pgrelay._event_settings():
// pgrelay.settings' row, or the defaults).
func PublishSettings(ctx context.Context, c Querier) (EventSettings, error) {
	var s EventSettings
	var v int32
	if err := c.QueryRow(ctx, `SELECT event_schema, cluster_name FROM pgrelay._event_settings()`).Scan(&v, &s.Cluster); err != nil {
		return s, fmt.Errorf("read pgrelay.settings: %w", err)
	}
	s.Schema = int(v)
	return s, nil
}

// LogRow is a log row to publish, with its payload when its channel
// publishes payloads.
type LogRow struct {
	events.LogEvent
	// PublishPayload: the channel publishes payloads.
	PublishPayload bool
	// Payload: the kept payload (nil when none was kept).
	Payload *string
	// PublishErrors: the channel's publish_errors (events.ErrorsClass when
	// the channel is gone).
	PublishErrors string
}

// LogBatch returns up to limit log rows of node with after < id < before, in
// id order. Payloads come from event_payloads (kept at enqueue time), or the
// queue row while it still exists.
func LogBatch(ctx context.Context, c Querier, node int, after, before int64, limit int) ([]LogRow, error) {
	rows, err := c.Query(ctx, `
		SELECT l.id, l.queue_id, l.origin_id, l.channel, l.attempt, l.event, l.error, l.node, l.at,
		       COALESCE(l.priority, 0::pg_catalog.int2), COALESCE(ch.publish_payload, false),
		       CASE WHEN ch.publish_payload THEN
		         COALESCE((SELECT p.payload FROM pgrelay.event_payloads p WHERE p.queue_id OPERATOR(pg_catalog.=) l.queue_id),
		                  (SELECT q.payload FROM pgrelay.queue q WHERE q.id OPERATOR(pg_catalog.=) l.queue_id))
		       END,
		       COALESCE(ch.publish_errors, $5::pg_catalog.text)
		  FROM pgrelay.log l
		  LEFT JOIN pgrelay.channels ch ON ch.channel OPERATOR(pg_catalog.=) l.channel
		 WHERE l.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND l.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
		   AND l.id OPERATOR(pg_catalog.<) $3::pg_catalog.int8
		 ORDER BY l.id
		 LIMIT $4::pg_catalog.int8`, node, after, before, limit, events.ErrorsClass)
	if err != nil {
		return nil, fmt.Errorf("read log rows of node %d after %d: %w", node, after, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (LogRow, error) {
		var l LogRow
		var ev string
		var attempt, n int32
		var priority int16
		err := r.Scan(&l.ID, &l.QueueID, &l.OriginID, &l.Channel, &attempt, &ev, &l.Error, &n, &l.At,
			&priority, &l.PublishPayload, &l.Payload, &l.PublishErrors)
		l.Event, l.Attempt, l.Node, l.Priority = events.Kind(ev), int(attempt), int(n), int(priority)
		return l, err
	})
	if err != nil {
		return nil, fmt.Errorf("read log rows of node %d after %d: %w", node, after, err)
	}
	return out, nil
}

// NotifierBatch returns up to limit notifier status events of node with
// after < id < before, in id order, with their error as the channel's
// publish_errors has it published (events.PublishedError; a channel gone
// counts as events.ErrorsClass).
func NotifierBatch(ctx context.Context, c Querier, node int, after, before int64, limit int) ([]events.NotifierStatus, error) {
	rows, err := c.Query(ctx, `SELECT s.id, s.notification_id, s.channel, s.status, s.error, s.node, s.at,
		       COALESCE(ch.publish_errors, $5::pg_catalog.text)
		  FROM pgrelay._notifier_status_batch($1::pg_catalog.int4, $2::pg_catalog.int8, $3::pg_catalog.int8, $4::pg_catalog.int4) s
		  LEFT JOIN pgrelay.channels ch ON ch.channel OPERATOR(pg_catalog.=) s.channel
		 ORDER BY s.id`, node, after, before, limit, events.ErrorsClass)
	if err != nil {
		return nil, fmt.Errorf("read notifier status events of node %d after %d: %w", node, after, err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (events.NotifierStatus, error) {
		var s events.NotifierStatus
		var n int32
		var policy string
		err := r.Scan(&s.ID, &s.NotificationID, &s.Channel, &s.Status, &s.Error, &n, &s.At, &policy)
		s.Node, s.At = int(n), s.At.UTC()
		s.Error, s.ErrorClass = events.PublishedError(s.Error, policy)
		return s, err
	})
	if err != nil {
		return nil, fmt.Errorf("read notifier status events of node %d after %d: %w", node, after, err)
	}
	return out, nil
}

// BacklogCap bounds the backlog count: counting stops past it, so the count
// stays cheap however far behind publishing is.
const BacklogCap = 100000

// Backlog counts the rows of source written by node past cursor, up to
// BacklogCap + 1 (a count above BacklogCap means "more than that").
func Backlog(ctx context.Context, c Querier, node int, source string, after int64) (int64, error) {
	var q string
	switch source {
	case events.SourceLog:
		q = `SELECT pg_catalog.count(*) FROM (SELECT FROM pgrelay.log l
			WHERE l.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND l.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
			LIMIT $3::pg_catalog.int8) x`
	case events.SourceNotifier:
		q = `SELECT pg_catalog.count(*) FROM (SELECT FROM pgrelay_notifier.status_events s
			WHERE s.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND s.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
			LIMIT $3::pg_catalog.int8) x`
	default:
		return 0, fmt.Errorf("unknown publish source %q", source)
	}
	var n int64
	if err := c.QueryRow(ctx, q, node, after, BacklogCap+1).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the %s backlog of node %d: %w", source, node, err)
	}
	return n, nil
}

// CursorBacklog is one row of pgrelay.publish_backlog().
type CursorBacklog struct {
	Node      int
	Source    string
	LastID    int64
	Backlog   int64 // above BacklogCap: more than BacklogCap
	UpdatedAt time.Time
	// OldestAt is the time of the oldest row not yet published (nil when
	// none): the publisher's lag.
	OldestAt *time.Time
}

// PublishBacklog returns pgrelay.publish_backlog(): per node and source, the
// events not yet published on NATS. Empty when no publisher ever ran.
func PublishBacklog(ctx context.Context, q Querier) ([]CursorBacklog, error) {
	rows, err := q.Query(ctx, `SELECT node_id, source, last_id, backlog, updated_at, oldest_at
		FROM pgrelay.publish_backlog($1::pg_catalog.int4)`, BacklogCap)
	if err != nil {
		return nil, fmt.Errorf("publish_backlog: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (CursorBacklog, error) {
		var c CursorBacklog
		var n int32
		err := r.Scan(&n, &c.Source, &c.LastID, &c.Backlog, &c.UpdatedAt, &c.OldestAt)
		c.Node = int(n)
		return c, err
	})
	if err != nil {
		return nil, fmt.Errorf("publish_backlog: %w", err)
	}
	return out, nil
}

// Dropped sums, per node, the log rows that retention deleted before the
// NATS publisher of their node had published them (pgrelay.log_dropped).
type Dropped struct {
	Node            int
	Rows            int64
	FirstID, LastID int64
	LastDroppedAt   time.Time
}

// LogDropped returns pgrelay.log_dropped summed per node (empty when
// retention never dropped an unpublished row).
func LogDropped(ctx context.Context, q Querier) ([]Dropped, error) {
	rows, err := q.Query(ctx, `SELECT node, pg_catalog.sum(rows)::pg_catalog.int8, pg_catalog.min(first_id), pg_catalog.max(last_id),
		pg_catalog.max(dropped_at)
		FROM pgrelay.log_dropped GROUP BY node ORDER BY node`)
	if err != nil {
		return nil, fmt.Errorf("read pgrelay.log_dropped: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Dropped, error) {
		var d Dropped
		var n int32
		err := r.Scan(&n, &d.Rows, &d.FirstID, &d.LastID, &d.LastDroppedAt)
		d.Node = int(n)
		return d, err
	})
	if err != nil {
		return nil, fmt.Errorf("read pgrelay.log_dropped: %w", err)
	}
	return out, nil
}

// OldestUnpublished is the time of the oldest row of source written by node
// past cursor (nil when none): the publisher's lag.
func OldestUnpublished(ctx context.Context, c Querier, node int, source string, after int64) (*time.Time, error) {
	var q string
	switch source {
	case events.SourceLog:
		q = `SELECT l.at FROM pgrelay.log l
			WHERE l.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND l.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
			ORDER BY l.node, l.id LIMIT 1`
	case events.SourceNotifier:
		q = `SELECT s.at FROM pgrelay_notifier.status_events s
			WHERE s.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND s.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
			ORDER BY s.node, s.id LIMIT 1`
	default:
		return nil, fmt.Errorf("unknown publish source %q", source)
	}
	var at time.Time
	switch err := c.QueryRow(ctx, q, node, after).Scan(&at); {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the oldest unpublished %s row of node %d: %w", source, node, err)
	}
	return &at, nil
}

// TrimEventPayloads deletes up to batch kept payloads older than olderThan
// whose queue rows are gone and that no publisher may still need (up to
// unpublishedMax).
func (s *Store) TrimEventPayloads(ctx context.Context, olderThan, unpublishedMax time.Duration, batch int) (int, error) {
	var n int
	err := s.bg.QueryRow(ctx, "SELECT pgrelay._trim_event_payloads($1::pg_catalog.interval, $2::pg_catalog.int4, $3::pg_catalog.interval)", olderThan, batch, unpublishedMax).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("trim kept payloads older than %s: %w", olderThan, err)
	}
	return n, nil
}

// EmailChannelsExist reports whether an email channel is registered: the
// notifier is used.
func EmailChannelsExist(ctx context.Context, c Querier) (bool, error) {
	var ok bool
	if err := c.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pgrelay.channels c
		WHERE c.kind OPERATOR(pg_catalog.=) 'email'::pg_catalog.text)`).Scan(&ok); err != nil {
		return false, fmt.Errorf("look for email channels: %w", err)
	}
	return ok, nil
}
