package store

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
)

// A publish horizon refused for want of pg_read_all_stats (PR040) says, in
// the error the publisher logs, the GRANT that ends it.
func TestPublishHorizonErrorCarriesTheFix(t *testing.T) {
	ctx := context.Background()
	pool := pg.Pool(t)
	// An owner that cannot see other sessions: a role of its own, outside
	// pg_read_all_stats (roles are cluster-wide: named after the database).
	var role string
	require.NoError(t, pool.QueryRow(ctx, `SELECT current_database() || '_blind'`).Scan(&role))
	for _, sql := range []string{
		`CREATE ROLE "` + role + `" NOLOGIN`,
		`GRANT USAGE, CREATE ON SCHEMA pgrelay TO "` + role + `"`,
		`ALTER FUNCTION pgrelay._publish_horizon() OWNER TO "` + role + `"`,
	} {
		_, err := pool.Exec(ctx, sql)
		require.NoError(t, err, sql)
	}
	c, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer c.Release()
	_, err = PublishHorizon(ctx, c.Conn())
	require.Error(t, err)
	require.Contains(t, err.Error(), "SQLSTATE PR040")
	require.Contains(t, err.Error(), `(fix: GRANT pg_read_all_stats TO `+role+`;)`)
}
