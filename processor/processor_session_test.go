package processor_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
	"github.com/pgrelay/pgrelay/processor"
)

// No HandleTx handler's settings or role reach another channel's handler or
// pgrelay's own statements: what channel a's handlers set through their tx —
// a session setting, search_path, a role without any right on pgrelay's
// schema — is never seen by channel b's handlers, which run in other batches
// on the same pool, and never reaches the batches' completions (every event
// succeeds, recorded once).
func TestGoHandleTxSessionIsClean(t *testing.T) {
	t.Parallel()
	d := goDB(t)
	role := d.Name() + "_handler"
	d.Exec("CREATE ROLE " + role)
	d.Exec("CREATE TABLE app.seen (channel text, payload text, app text, search_path text, usr text)")
	d.Exec("GRANT USAGE ON SCHEMA app TO " + role)
	d.Exec("GRANT INSERT ON app.seen TO " + role)
	d.Exec("SELECT pgrelay.register('a', 'a', p_kind := 'go')")
	d.Exec("SELECT pgrelay.register('b', 'b', p_kind := 'go')")
	look := func(ctx context.Context, tx pgx.Tx, channel string, ev pgrelay.Event) error {
		_, err := tx.Exec(ctx, `INSERT INTO app.seen VALUES ($1, $2, current_setting('app.leak', true),
		  current_setting('search_path'), current_user::text)`, channel, ev.Payload)
		return err
	}
	startGo(t, d.URL, func(p *processor.Processor) {
		p.HandleTx("a", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			if err := look(ctx, tx, "a", ev); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, fmt.Sprintf(`SELECT set_config('app.leak', $1, false),
			  set_config('search_path', 'pg_temp, public', false), set_config('role', '%s', false)`, role), ev.Payload)
			return err
		})
		p.HandleTx("b", func(ctx context.Context, tx pgx.Tx, ev pgrelay.Event) error {
			return look(ctx, tx, "b", ev)
		})
	})
	d.Exec(`SELECT pgrelay.notify(CASE WHEN g % 2 = 0 THEN 'a' ELSE 'b' END, g::text) FROM generate_series(1, 400) g`)
	testenv.Eventually(t, 60*time.Second, "400 successes", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 400
	})
	require.Zero(t, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event <> 'succeeded'`))
	require.Equal(t, 200, d.Count(`SELECT count(DISTINCT payload) FROM app.seen WHERE channel = 'b'`))
	b := `SELECT count(*) FROM app.seen WHERE channel = 'b' AND `
	require.Zero(t, d.Count(b+`COALESCE(app, '') <> ''`), "a session setting reached another channel's handler")
	require.Zero(t, d.Count(b+`search_path <> '"$user", public'`), "search_path reached another channel's handler")
	require.Zero(t, d.Count(b+`usr <> session_user`), "the role reached another channel's handler")
}
