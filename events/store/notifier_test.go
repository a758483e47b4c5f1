package store

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A cancel() or DELETE that commits while the email handler is fetching the
// notification wins: the handler gets nothing to send, and the status stays
// what the cancel made it. Fetched before the row lock, the message would go
// out although cancel() had returned true.
func TestStartSendingLosesToConcurrentCancel(t *testing.T) {
	ctx := context.Background()
	pool := pg.Pool(t)
	s := New(pool, nil, nil)
	_, err := pool.Exec(ctx, `SELECT pgrelay_notifier.create_channel('mail', 'shop@example.org')`)
	require.NoError(t, err)
	send := func() int64 {
		var id int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT pgrelay_notifier.send('mail', ARRAY['a@example.org'], 'Hi', 'Body')`).Scan(&id))
		return id
	}

	// Control: a queued notification is fetched and counted as an attempt.
	id := send()
	g, err := s.StartSending(ctx, id, "mail", 1)
	require.NoError(t, err)
	require.Equal(t, VerdictSend, g.Verdict)
	n := g.Notification
	require.NotNil(t, n)
	require.Equal(t, NotificationSending, n.Status)
	require.Equal(t, 1, n.Attempts)

	for _, tc := range []struct{ name, stmt, status, verdict string }{
		{"cancel", `SELECT pgrelay_notifier.cancel($1)`, NotificationCancelled, VerdictCancelled},
		{"delete", `DELETE FROM pgrelay_notifier.notifications WHERE notification_id = $1`, "", VerdictMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := send()
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			defer func() { _ = tx.Rollback(ctx) }()
			_, err = tx.Exec(ctx, tc.stmt, id)
			require.NoError(t, err)

			type result struct {
				g   Gate
				err error
			}
			done := make(chan result, 1)
			go func() {
				g, err := s.StartSending(ctx, id, "mail", 2)
				done <- result{g, err}
			}()
			// The fetch waits on the cancel's row lock; commit only then.
			require.Eventually(t, func() bool {
				var waiting bool
				require.NoError(t, pool.QueryRow(ctx, `SELECT EXISTS (SELECT FROM pg_stat_activity
				  WHERE datname = current_database() AND wait_event_type = 'Lock'
				    AND query LIKE '%start_sending%')`).Scan(&waiting))
				return waiting
			}, 10*time.Second, 10*time.Millisecond)
			require.NoError(t, tx.Commit(ctx))

			r := <-done
			require.NoError(t, r.err)
			require.Equal(t, tc.verdict, r.g.Verdict, tc.name)
			require.Nil(t, r.g.Notification, "nothing to send after a committed %s", tc.name)
			var status *string
			var attempts *int
			err = pool.QueryRow(ctx, `SELECT status, attempts FROM pgrelay_notifier.notifications
			  WHERE notification_id = $1`, id).Scan(&status, &attempts)
			if tc.status == "" {
				require.ErrorContains(t, err, "no rows")
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.status, *status)
			require.Equal(t, 0, *attempts)
		})
	}
}
