package actors_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// slowRescueLock is the advisory lock a slowed pgrelay._rescue waits for.
const slowRescueLock = 33

// slowRescue makes pgrelay._rescue wait for an advisory lock that the test
// holds until the returned function releases it.
func (e *env) slowRescue() (release func()) {
	e.T.Helper()
	ctx := context.Background()
	e.Exec(`ALTER FUNCTION pgrelay._rescue(bigint, interval, interval) RENAME TO _rescue_unslowed`)
	e.Exec(`CREATE FUNCTION pgrelay._rescue(p_processor bigint, p_dead_after interval, p_lease_grace interval)
	        RETURNS integer LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $$
	        BEGIN
	          PERFORM pg_catalog.pg_advisory_xact_lock_shared(33);
	          RETURN pgrelay._rescue_unslowed(p_processor, p_dead_after, p_lease_grace);
	        END $$`)
	hold, err := e.Pool.Acquire(ctx)
	require.NoError(e.T, err)
	_, err = hold.Exec(ctx, "SELECT pg_advisory_lock($1)", slowRescueLock)
	require.NoError(e.T, err)
	return func() {
		_, err := hold.Exec(ctx, "SELECT pg_advisory_unlock($1)", slowRescueLock)
		require.NoError(e.T, err)
		hold.Release()
	}
}

// The leader lease is renewed at every beat, and the instance stays alive,
// while a rescue is slowed past --dead-after: the lease, the heartbeat and
// the rescue run in actors of their own, none waiting for another.
func TestActorLeaseRenewsWhileRescueIsSlow(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE ran (payload text)`)
	e.Exec(`SELECT pgrelay.register('u', 'INSERT INTO public.ran(payload) VALUES ($1)')`)
	release := e.slowRescue()
	defer release() // before the Processor stops (t.Cleanup)
	e.startNode(1, actors.ModeLeader, func(c *actors.Config) {
		c.HeartbeatInterval = 100 * time.Millisecond
		c.DeadAfter = time.Second
	})
	testenv.Eventually(e.T, 30*time.Second, "a rescue waiting for longer than dead-after, the lease held and the instance alive", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now()) l
		                 WHERE l.leader_node = 1
		                   AND EXISTS (SELECT FROM pg_catalog.pg_stat_activity a
		                                WHERE a.datname = current_database() AND a.wait_event_type = 'Lock'
		                                  AND a.query LIKE '%pgrelay._rescue(%'
		                                  AND a.query_start < now() - interval '1 second')
		                   AND EXISTS (SELECT FROM pgrelay.processors p WHERE p.last_seen > now() - interval '1 second')`) == 1
	})
	for range 3 {
		until := e.Text(`SELECT lease_until::text FROM pgrelay.leader_leases WHERE node_id = 1`)
		testenv.Eventually(e.T, 30*time.Second, "the lease renewed again", func() bool {
			return e.Count(`SELECT count(*) FROM pgrelay._lease_holder(now())
			                 WHERE leader_node = 1 AND lease_until > $1::timestamptz`, until) == 1
		})
	}
	// It leads: it runs the unrestricted rows.
	e.enqueueOn(1, "u", payloads("a", 5))
	testenv.Eventually(e.T, 30*time.Second, "the leader to run the rows", func() bool {
		return e.Count(`SELECT count(*) FROM ran`) == 5
	})
}
