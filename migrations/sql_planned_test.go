package migrations_test

import (
	"regexp"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// The functions called for every claim, every direct batch, every wake-up
// and every woken notify() keep their plans for the session. An SQL-language
// function whose body is a query, rather than one expression the planner
// inlines into its caller, is planned anew at every call: 50–80 µs a call
// (measured with pgbench, one session), against under 10 µs for the same
// query in PL/pgSQL, whose plans a session caches.
func TestHotFunctionsKeepTheirPlans(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	hot := []string{
		"pgrelay._claim_prioritised(text)",                           // every claim of a 'none' channel
		"pgrelay._claim_scope(text,boolean,bigint)",                  // every claim
		"pgrelay._holds_lease(bigint,timestamp with time zone)",      // a leader's claims and batches
		"pgrelay._this_node()",                                       // nearly every function
		"pgrelay._wake_hint(text)",                                   // every woken notify(), every replicated row
		"pgrelay._wake_xids_ended(pg_snapshot)",                      // every idle claimer's arming
		"pgrelay._next_ids(integer)",                                 // every batch's log rows
		"pgrelay._may_take(integer,integer,integer,boolean,boolean)", // inlined into every claim
	}
	// A query in the body: a SELECT (or FROM) anywhere in it.
	query := regexp.MustCompile(`(?i)\b(select|from)\b`)
	for _, fn := range hot {
		var lang, body string
		var set bool
		require.NoError(t, d.Pool.QueryRow(bg, `SELECT l.lanname, p.proconfig IS NOT NULL,
			  COALESCE(pg_catalog.pg_get_function_sqlbody(p.oid), p.prosrc)
			FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_language l ON l.oid = p.prolang
			WHERE p.oid = $1::regprocedure`, fn).Scan(&lang, &set, &body), fn)
		switch lang {
		case "plpgsql":
		case "sql":
			assert.False(t, set, "%s: an SQL function with a SET clause is never inlined", fn)
			assert.NotRegexp(t, query, body, "%s: an SQL function with a query in it is planned at every call", fn)
		default:
			t.Errorf("%s: language %s", fn, lang)
		}
	}
	// They still answer as before.
	require.Equal(t, []bool{false}, testenv.Column[bool](t, d.Pool, "SELECT pgrelay._claim_prioritised('none')"))
	require.Equal(t, []bool{true}, testenv.Column[bool](t, d.Pool,
		"SELECT pgrelay._wake_hint('c') = md5((SELECT wake_key FROM pgrelay.this_node) || 'c')"))
	// Snapshots of their own: the cluster's current one holds whatever the
	// tests running beside this one have in progress.
	require.Equal(t, []bool{true}, testenv.Column[bool](t, d.Pool, "SELECT pgrelay._wake_xids_ended('10:10:'::pg_snapshot)"))
	inTx(t, d.Conn(-1), func(tx pgx.Tx) {
		require.False(t, testenv.One[bool](t, tx, `SELECT pgrelay._wake_xids_ended(pg_catalog.format('%s:%s:%s',
			pg_current_xact_id(), pg_current_xact_id()::text::bigint + 1, pg_current_xact_id())::pg_snapshot)`),
			"this transaction, in progress")
	})
	require.Equal(t, []bool{false}, testenv.Column[bool](t, d.Pool, "SELECT pgrelay._holds_lease(1, now())"))
}
