package migrations_test

// The SQL interface's parameter names are part of the contract (SPEC.md):
// callers pass them by name (p_publish_payload := true), so a renamed or
// reordered parameter breaks them. These tests pin the names.

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

// identityArgs is pg_get_function_identity_arguments of the one function
// schema.name (the test fails when there is none, or more than one).
func identityArgs(t *testing.T, q querier, fn string) string {
	t.Helper()
	got := testenv.Column[string](t, q, `SELECT pg_get_function_identity_arguments(p.oid) FROM pg_proc p
		WHERE p.pronamespace::regnamespace::text || '.' || p.proname = $1`, fn)
	require.Len(t, got, 1, "one function %s", fn)
	return got[0]
}

// argNames is proargnames of the one function fn, its input parameters only.
func argNames(t *testing.T, q querier, fn string) []string {
	t.Helper()
	got := testenv.Column[[]string](t, q, `SELECT (SELECT array_agg(n ORDER BY i) FROM unnest(p.proargnames, coalesce(p.proargmodes, array_fill('i'::"char", ARRAY[cardinality(p.proargnames)])))
		                           WITH ORDINALITY AS a(n, m, i) WHERE m IN ('i', 'b', 'v'))
		FROM pg_proc p WHERE p.pronamespace::regnamespace::text || '.' || p.proname = $1`, fn)
	require.Len(t, got, 1, "one function %s", fn)
	return got[0]
}

// Parameters in pg_get_function_arguments: "p_x type[ DEFAULT expr]",
// separated by ", p_".
var (
	nextParameter = regexp.MustCompile(`, p_`)
	parameter     = regexp.MustCompile(`^(p_[a-z_]+) (.+)$`)
)

// arguments maps each parameter of fn to its type and default, as
// pg_get_function_arguments writes them.
func arguments(t *testing.T, q querier, fn string) map[string]string {
	t.Helper()
	s := testenv.One[string](t, q, `SELECT pg_get_function_arguments(p.oid) FROM pg_proc p
		WHERE p.pronamespace::regnamespace::text || '.' || p.proname = $1`, fn)
	out := map[string]string{}
	for i, p := range nextParameter.Split(s, -1) {
		if i > 0 {
			p = "p_" + p
		}
		m := parameter.FindStringSubmatch(p)
		require.NotNil(t, m, "parameter %q of %s", p, fn)
		out[m[1]] = m[2]
	}
	return out
}

// The functions SPEC.md names, with the parameter names it gives them.
func TestSQLSignaturesMatchSpec(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	exact := map[string]string{
		"pgrelay.notify":              "p_channel text, p_payload text, p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text, p_unique_for interval",
		"pgrelay.notify_many":         "p_channel text, p_payloads text[], p_not_before timestamp with time zone, p_delay interval, p_priority integer, p_key text[], p_unique_for interval",
		"pgrelay.unregister":          "p_channel text, p_force boolean",
		"pgrelay.status":              "p_id bigint",
		"pgrelay.cancel":              "p_id bigint",
		"pgrelay.queue_stats":         "",
		"pgrelay._next_id":            "",
		"pgrelay._this_node":          "",
		"pgrelay_notifier.send":       "p_channel text, p_to text[], p_subject text, p_body_text text, p_body_html text, p_cc text[], p_bcc text[], p_headers jsonb",
		"pgrelay_notifier.fetch":      "p_notification_id bigint",
		"pgrelay_notifier.set_status": "p_notification_id bigint, p_status text, p_error text",
		"pgrelay_notifier.debug_log":  "p_notification_id bigint, p_message text",
		"pgrelay_notifier.get_status": "p_notification_id bigint",
		"pgrelay_notifier.cancel":     "p_notification_id bigint",
	}
	for fn, want := range exact {
		require.Equal(t, want, identityArgs(t, d.Pool, fn), fn)
	}
	// The delay parameters default to NULL: two-argument calls stay immediate.
	for _, fn := range []string{"pgrelay.notify", "pgrelay.notify_many"} {
		args := arguments(t, d.Pool, fn)
		require.Equal(t, "timestamp with time zone DEFAULT NULL::timestamp with time zone", args["p_not_before"], fn)
		require.Equal(t, "interval DEFAULT NULL::interval", args["p_delay"], fn)
		// So do the producer's options: a call that gives none takes the
		// path of before.
		require.Equal(t, "integer DEFAULT NULL::integer", args["p_priority"], fn)
		require.Equal(t, "interval DEFAULT NULL::interval", args["p_unique_for"], fn)
		require.Contains(t, args["p_key"], "DEFAULT NULL::text", fn)
	}

	// register: SPEC.md's parameters in its order; pgrelay's own additions
	// may follow them.
	spec := []string{"p_channel", "p_handler", "p_kind", "p_concurrency_mode", "p_deduplicate",
		"p_node_restricted", "p_max_attempts", "p_retry_delay", "p_expire_after", "p_timeout"}
	register := argNames(t, d.Pool, "pgrelay.register")
	require.Equal(t, spec, register[:len(spec)], "register's parameters")
	require.Equal(t, []string{"p_publish_payload", "p_publish_errors", "p_publish_enqueued",
		"p_priority", "p_max_in_flight", "p_rate_limit", "p_rate_period", "p_store_traces"}, register[len(spec):], "register's additions")
	// update: "the same named parameters", and p_paused.
	update := argNames(t, d.Pool, "pgrelay.update")
	for _, p := range register {
		require.Contains(t, update, p, "update has register's %s", p)
	}
	require.Equal(t, "p_channel", update[0])
	require.Contains(t, update, "p_paused")
	require.Len(t, update, len(register)+1)
	// SPEC.md's queue_stats columns come first.
	require.Equal(t, []string{"channel", "pending", "pending_restricted", "in_flight", "retrying", "oldest_pending"},
		testenv.Column[string](t, d.Pool, `SELECT n FROM pg_proc p, unnest(p.proargnames, p.proargmodes) WITH ORDINALITY AS a(n, m, i)
			WHERE p.oid = 'pgrelay.queue_stats()'::regprocedure AND m = 't' ORDER BY i LIMIT 6`))
}

// create_channel passes register()'s parameters through by name: it must
// have every one of them, with the same type and default, but p_handler and
// p_kind (it supplies those: the From address and 'email'), and p_from
// besides. p_max_attempts and p_retry_delay have email's own defaults
// (they outlast an hour of SMTP trouble). A parameter register() gains must
// be added to create_channel too (its comment says parameters pass through
// by name; this test is what holds the two together).
func TestNotifierCreateChannelHasRegistersParameters(t *testing.T) {
	t.Parallel()
	d := newSQLDB(t)
	register := argNames(t, d.Pool, "pgrelay.register")
	create := argNames(t, d.Pool, "pgrelay_notifier.create_channel")
	want := []string{"p_channel", "p_from"}
	for _, p := range register {
		if p != "p_channel" && p != "p_handler" && p != "p_kind" {
			want = append(want, p)
		}
	}
	require.Equal(t, want, create)

	regArgs := arguments(t, d.Pool, "pgrelay.register")
	createArgs := arguments(t, d.Pool, "pgrelay_notifier.create_channel")
	require.Len(t, createArgs, len(create))
	require.Equal(t, "interval DEFAULT '00:00:01'::interval", regArgs["p_retry_delay"])
	require.Equal(t, "interval DEFAULT '00:00:10'::interval", createArgs["p_retry_delay"])
	require.Equal(t, "integer DEFAULT 5", regArgs["p_max_attempts"])
	require.Equal(t, "integer DEFAULT 10", createArgs["p_max_attempts"])
	for _, p := range create {
		switch p {
		case "p_from":
			continue
		case "p_max_attempts", "p_retry_delay":
			require.Equal(t, strings.Fields(regArgs[p])[0], strings.Fields(createArgs[p])[0], "type of %s", p)
			continue
		}
		require.Equal(t, regArgs[p], createArgs[p], "type and default of %s", p)
	}
	require.True(t, slices.Contains(create, "p_publish_payload"))
}
