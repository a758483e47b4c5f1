package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events"
)

// The statements `pgrelay doctor` sends about pgrelay's own schema. They
// run on doctor's session, whose search_path is SearchPath: what they name
// unqualified resolves in pg_catalog.

// SchemaInfo is what doctor reads first of a database with pgrelay.
type SchemaInfo struct {
	Owner    string // owner of schema pgrelay
	OwnerID  uint32
	Node     int    // pgrelay._this_node()
	Database string // current_database()
	Cluster  bool   // pglogical or Spock is installed
}

// ReadSchemaInfo reads schema pgrelay's owner, this node's id, the database
// and whether a replication extension is installed.
func ReadSchemaInfo(ctx context.Context, q Querier) (SchemaInfo, error) {
	var s SchemaInfo
	err := q.QueryRow(ctx, `SELECT r.rolname::text, r.oid, pgrelay._this_node(), pg_catalog.current_database()::text,
		  EXISTS (SELECT FROM pg_catalog.pg_extension x WHERE x.extname IN ('spock', 'pglogical'))
		FROM pg_catalog.pg_namespace s JOIN pg_catalog.pg_roles r ON r.oid = s.nspowner
		WHERE s.nspname = 'pgrelay'`).Scan(&s.Owner, &s.OwnerID, &s.Node, &s.Database, &s.Cluster)
	if err != nil {
		return s, fmt.Errorf("read pgrelay's owner and node id: %w", err)
	}
	return s, nil
}

// PublishCursorCount counts pgrelay.publish_cursors' rows: none until a NATS
// publisher has run on the database.
func PublishCursorCount(ctx context.Context, q Querier) (int, error) {
	var n int
	if err := q.QueryRow(ctx, "SELECT pg_catalog.count(*) FROM pgrelay.publish_cursors").Scan(&n); err != nil {
		return 0, fmt.Errorf("count pgrelay.publish_cursors: %w", err)
	}
	return n, nil
}

// HorizonOwner reads the owner of pgrelay._publish_horizon() and whether it
// sees every session's transaction (a superuser or a member of
// pg_read_all_stats), which the NATS publisher needs.
func HorizonOwner(ctx context.Context, q Querier) (owner string, seesAll bool, err error) {
	if err := q.QueryRow(ctx, `SELECT r.rolname::text, r.rolsuper OR pg_catalog.pg_has_role(r.oid, 'pg_read_all_stats', 'USAGE')
		FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_roles r ON r.oid = p.proowner
		WHERE p.oid = 'pgrelay._publish_horizon()'::regprocedure`).Scan(&owner, &seesAll); err != nil {
		return "", false, fmt.Errorf("read the owner of pgrelay._publish_horizon(): %w", err)
	}
	return owner, seesAll, nil
}

// UnpublishedAge reads the oldest row of source (events.SourceLog or
// events.SourceNotifier) node wrote past cursor after, and its age by the
// server's clock; ok is false when there is none.
func UnpublishedAge(ctx context.Context, q Querier, node int, source string, after int64) (oldest time.Time, age time.Duration, ok bool, err error) {
	sql := `SELECT l.at FROM pgrelay.log l
		WHERE l.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND l.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
		ORDER BY l.node, l.id LIMIT 1`
	if source == events.SourceNotifier {
		sql = `SELECT s.at FROM pgrelay_notifier.status_events s
		WHERE s.node OPERATOR(pg_catalog.=) $1::pg_catalog.int4 AND s.id OPERATOR(pg_catalog.>) $2::pg_catalog.int8
		ORDER BY s.node, s.id LIMIT 1`
	}
	err = q.QueryRow(ctx, `SELECT x.at, pg_catalog.clock_timestamp() OPERATOR(pg_catalog.-) x.at FROM (`+sql+`) x`, node, after).Scan(&oldest, &age)
	if errors.Is(err, pgx.ErrNoRows) {
		return oldest, 0, false, nil
	}
	if err != nil {
		return oldest, 0, false, fmt.Errorf("oldest unpublished %s row of node %d: %w", source, node, err)
	}
	return oldest, age, true, nil
}

// QueueVacuum reads the server's autovacuum setting and pgrelay.queue's
// storage parameters (reloptions, "name=value" each).
func QueueVacuum(ctx context.Context, q Querier) (autovacuum string, reloptions []string, err error) {
	if err := q.QueryRow(ctx, `SELECT pg_catalog.current_setting('autovacuum'), COALESCE(c.reloptions, '{}')
		FROM pg_catalog.pg_class c WHERE c.oid = 'pgrelay.queue'::regclass`).Scan(&autovacuum, &reloptions); err != nil {
		return "", nil, fmt.Errorf("read autovacuum and pgrelay.queue's storage parameters: %w", err)
	}
	return autovacuum, reloptions, nil
}
