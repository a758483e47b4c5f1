package store

import (
	"context"
	"fmt"
)

// Connections is what the server has of client connections.
type Connections struct {
	// Max is max_connections, Reserved superuser_reserved_connections.
	Max, Reserved int
	// Open counts the client backends open now, the reading session's own
	// included.
	Open int
}

// ServerConnections reads the server's connection limits and the client
// connections open now.
func ServerConnections(ctx context.Context, q Querier) (Connections, error) {
	var c Connections
	if err := q.QueryRow(ctx, `SELECT pg_catalog.current_setting('max_connections')::pg_catalog.int4,
		pg_catalog.current_setting('superuser_reserved_connections')::pg_catalog.int4,
		(SELECT pg_catalog.count(*)::pg_catalog.int4 FROM pg_catalog.pg_stat_activity a
		  WHERE a.backend_type OPERATOR(pg_catalog.=) 'client backend'::pg_catalog.text)`).Scan(&c.Max, &c.Reserved, &c.Open); err != nil {
		return c, fmt.Errorf("read max_connections: %w", err)
	}
	return c, nil
}

// SeesAllSessions reports whether the current user (who runs migrations
// and so owns the schema) is a superuser or a member of pg_read_all_stats:
// pgrelay._publish_horizon, SECURITY DEFINER, must see every session's
// transaction.
func SeesAllSessions(ctx context.Context, q Querier) (user string, sees bool, err error) {
	if err := q.QueryRow(ctx, `SELECT CURRENT_USER::pg_catalog.text,
		pg_catalog.pg_has_role(CURRENT_USER, 'pg_read_all_stats'::pg_catalog.name, 'USAGE'::pg_catalog.text)`).Scan(&user, &sees); err != nil {
		return "", false, fmt.Errorf("check the owner's pg_read_all_stats: %w", err)
	}
	return user, sees, nil
}
