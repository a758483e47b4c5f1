package cli_test

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// deadJSON is one dead letter of `pgrelay dead list --json` and `dead show --json`.
type deadJSON struct {
	ID        int64   `json:"id"`
	OriginID  int64   `json:"origin_id"`
	Channel   string  `json:"channel"`
	Payload   string  `json:"payload"`
	Attempts  int     `json:"attempts"`
	LastError *string `json:"last_error"`
	Outcome   string  `json:"outcome"`
	Node      int     `json:"node"`
}

// `pgrelay dead` end to end, with a real Processor (`pgrelay run`) and NATS:
// events of a failing handler end as dead letters; list and show read them
// (tables and --json); once the handler is fixed, retry of one id and of a
// channel (the bulk form needing --yes) makes them run and succeed; discard
// of several ids removes them. retried and discarded reach NATS as status
// events.
func TestDeadCommands(t *testing.T) {
	t.Parallel()
	n, js := startNATS(t)
	d := newDB(t)
	d.Exec(`CREATE TABLE public.fixed (ok int)`)
	// Fails (division by zero) until public.fixed has a row.
	handler := `SELECT 1 / (SELECT count(*)::int FROM public.fixed WHERE $1 IS NOT NULL)`
	d.Exec(`SELECT pgrelay.register('flaky', $1, p_max_attempts := 1)`, handler)
	d.Exec(`SELECT pgrelay.register('other', $1, p_max_attempts := 1)`, handler)
	run := startCLI(t, nil, "run", "--database-url", d.URL, "--nats-url", n.URL(), "--nats-publish-interval", "50ms",
		"--poll-interval", "100ms", "--heartbeat-interval", "200ms", "--dead-after", "2s", "--metrics-addr", "127.0.0.1:0")
	flaky := d.IDs(`SELECT pgrelay.notify_many('flaky', ARRAY['f1', 'f2', 'f3'])`)
	d.IDs(`SELECT pgrelay.notify_many('other', ARRAY['o1', 'o2'])`)
	testenv.Eventually(t, 60*time.Second, "5 dead letters", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.dead_letters`) == 5 || run.exited()
	})
	require.False(t, run.exited(), "the processor exited on its own")

	dead := func(args ...string) []deadJSON {
		t.Helper()
		code, out, errOut := cliMain(append([]string{"dead", "list", "--json", "--database-url", d.URL}, args...)...)
		require.Equal(t, 0, code, errOut)
		var got []deadJSON
		require.NoError(t, json.Unmarshal([]byte(out), &got), out)
		return got
	}
	all := dead()
	require.Len(t, all, 5)
	for _, l := range all {
		require.Equal(t, "gave_up", l.Outcome)
		require.EqualValues(t, 1, l.Attempts)
		require.NotNil(t, l.LastError)
		require.Contains(t, *l.LastError, "division by zero")
	}
	byChannel := dead("--channel", "flaky", "--since", "1h")
	require.Len(t, byChannel, 3)
	var payloads []string
	for _, l := range byChannel {
		payloads = append(payloads, l.Payload)
		require.Contains(t, flaky, l.OriginID)
	}
	require.ElementsMatch(t, []string{"f1", "f2", "f3"}, payloads)
	require.Empty(t, dead("--channel", "flaky", "--since", time.Now().Add(time.Hour).Format(time.RFC3339)))
	require.Len(t, dead("--limit", "2"), 2)

	code, out, errOut := cliMain("dead", "list", "--channel", "other", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Len(t, lines(out), 3, out)
	require.Regexp(t, `^ID\s+ORIGIN\s+CHANNEL\s+OUTCOME\s+ATTEMPTS\s+ENDED\s+NODE\s+LAST ERROR`, lines(out)[0])
	require.Contains(t, out, "division by zero")
	code, out, errOut = cliMain("dead", "list", "--limit", "1", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(the 1 most recent of 5; --limit shows more)")

	one := byChannel[0]
	id := strconv.FormatInt(one.ID, 10)
	code, out, errOut = cliMain("dead", "show", id, "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^payload\s+`+one.Payload+`$`, out)
	require.Regexp(t, `(?m)^channel\s+flaky$`, out)
	require.Contains(t, out, "division by zero")
	code, out, errOut = cliMain("dead", "show", "--json", id, "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	var shown deadJSON
	require.NoError(t, json.Unmarshal([]byte(out), &shown))
	require.Equal(t, one, shown)

	// The handler is fixed: a retried event runs and succeeds.
	d.Exec(`INSERT INTO public.fixed VALUES (1)`)
	code, out, errOut = cliMain("dead", "retry", id, "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `^retried dead letter `+id+`: enqueued again as [0-9]+\n$`, out)
	testenv.Eventually(t, 30*time.Second, "the retried event to succeed", func() bool {
		return testenv.One[string](t, d.Pool, "SELECT pgrelay.status($1)", one.OriginID) == "succeeded"
	})

	// A channel's: without --yes and without a terminal, nothing is done.
	code, out, errOut = runCLI(t, nil, "dead", "retry", "--channel", "flaky", "--database-url", d.URL)
	require.Equal(t, 2, code, errOut)
	require.Equal(t, "2 dead letters of channel flaky to retry\n", out)
	require.Contains(t, errOut, "needs --yes")
	require.Len(t, dead("--channel", "flaky"), 2)
	code, out, errOut = cliMain("dead", "retry", "--channel", "flaky", "--since", "1h", "--yes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasPrefix(out, "2 dead letters of channel flaky that ended since "), out)
	require.True(t, strings.HasSuffix(out, "\nretried 2 dead letters\n"), out)
	testenv.Eventually(t, 30*time.Second, "the flaky events to succeed", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'flaky' AND event = 'succeeded'`) == 3
	})
	require.Len(t, dead(), 2)

	// Discard several: --yes; then they are gone.
	others := dead("--channel", "other")
	ids := []string{strconv.FormatInt(others[0].ID, 10), strconv.FormatInt(others[1].ID, 10)}
	code, out, errOut = runCLI(t, nil, append([]string{"dead", "discard", "--database-url", d.URL}, ids...)...)
	require.Equal(t, 2, code, errOut)
	require.Equal(t, "2 dead letters to discard\n", out)
	code, out, errOut = cliMain(append([]string{"dead", "discard", "--yes", "--database-url", d.URL}, ids...)...)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "2 dead letters to discard\ndiscarded dead letter "+ids[0]+"\ndiscarded dead letter "+ids[1]+
		"\ndiscarded 2 dead letters\n", out)
	require.Empty(t, dead())
	require.Equal(t, 2, d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'discarded'`))
	code, out, errOut = cliMain("dead", "list", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Contains(t, out, "(no dead letters)")

	// Unknown ids: exit 1, PR050; a bulk form goes on past them.
	code, _, errOut = cliMain("dead", "discard", ids[0], "--database-url", d.URL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "PR050")
	code, _, errOut = cliMain("dead", "show", ids[0], "--database-url", d.URL)
	require.Equal(t, 1, code)
	require.Contains(t, errOut, "not a dead letter")
	code, out, errOut = cliMain("dead", "retry", "--yes", ids[0], ids[1], "--database-url", d.URL)
	require.Equal(t, 1, code)
	require.Contains(t, out, "retried 0 dead letters")
	require.Contains(t, errOut, "2 of 2 dead letters not retried")

	// The retries and discards are status events on NATS.
	ctx := context.Background()
	for _, subject := range []string{"pgrelay.events.flaky.retried", "pgrelay.events.other.discarded"} {
		testenv.Eventually(t, 30*time.Second, subject+" on NATS", func() bool {
			s, err := js.Stream(ctx, "PGRELAY_EVENTS")
			if err != nil {
				return false
			}
			_, err = s.GetLastMsgForSubject(ctx, subject)
			return err == nil
		})
	}
	s, err := js.Stream(ctx, "PGRELAY_EVENTS")
	require.NoError(t, err)
	m, err := s.GetLastMsgForSubject(ctx, "pgrelay.events.other.discarded")
	require.NoError(t, err)
	var doc events.Published
	require.NoError(t, json.Unmarshal(m.Data, &doc))
	assert.Equal(t, events.Discarded, doc.Event)
	assert.Empty(t, doc.ErrorClass, "an admin's note has no error class")
	assert.Contains(t, []int64{others[0].OriginID, others[1].OriginID}, doc.OriginID)

	run.signal(syscall.SIGTERM)
	assert.Equal(t, 0, run.wait(30*time.Second))
}

// The bulk discard of a channel's dead letters (pgrelay.discard_all): it
// asks for --yes like the bulk retry, leaves the other channels' and the
// older ones (--since) alone, and writes one discarded log row per letter.
func TestDeadDiscardChannel(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('gone', 'SELECT length($1)')`)
	d.Exec(`SELECT pgrelay.register('kept', 'SELECT length($1)')`)
	d.Exec(`INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome, ended_at, node)
		SELECT i, i, c, 'p' || i, 1, 'boom', 'gave_up', now() - CASE WHEN i = 3 THEN interval '2 hours' ELSE interval '1 minute' END, 0
		  FROM generate_series(1, 4) i, LATERAL (SELECT CASE WHEN i < 4 THEN 'gone' ELSE 'kept' END AS c) x`)

	code, out, errOut := runCLI(t, nil, "dead", "discard", "--channel", "gone", "--since", "1h", "--database-url", d.URL)
	require.Equal(t, 2, code, errOut)
	require.True(t, strings.HasPrefix(out, "2 dead letters of channel gone that ended since "), out)
	require.Contains(t, errOut, "needs --yes")
	require.Equal(t, 4, d.Count(`SELECT count(*) FROM pgrelay.dead_letters`))

	code, out, errOut = cliMain("dead", "discard", "--channel", "gone", "--since", "1h", "--yes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.True(t, strings.HasSuffix(out, "\ndiscarded 2 dead letters\n"), out)
	require.Equal(t, []int64{3, 4}, d.IDs(`SELECT id FROM pgrelay.dead_letters ORDER BY id`))
	require.Equal(t, []int64{1, 2}, d.IDs(`SELECT queue_id FROM pgrelay.log WHERE event = 'discarded' ORDER BY queue_id`))

	code, out, errOut = cliMain("dead", "discard", "--channel", "gone", "--yes", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Equal(t, "1 dead letters of channel gone to discard\ndiscarded 1 dead letters\n", out)
	require.Equal(t, []int64{4}, d.IDs(`SELECT id FROM pgrelay.dead_letters`))
}

// Usage errors of `pgrelay dead`, found before connecting.
func TestDeadUsage(t *testing.T) {
	t.Parallel()
	nowhere := closedPortURL(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{}, "usage: pgrelay dead list|show|retry|discard"},
		{[]string{"bury"}, `unknown subcommand "bury"`},
		{[]string{"show"}, "usage: pgrelay dead show ID"},
		{[]string{"show", "x"}, `dead letter id "x": expected a positive integer`},
		{[]string{"retry"}, "usage: pgrelay dead retry ID... | --channel C"},
		{[]string{"retry", "1", "--channel", "c"}, "give dead letter ids or --channel, not both"},
		{[]string{"retry", "1", "--since", "1h"}, "--since goes with --channel"},
		{[]string{"retry", "--channel", "c", "--since", "yesterday"}, `--since "yesterday"`},
		{[]string{"discard"}, "usage: pgrelay dead discard ID... | --channel C"},
		{[]string{"discard", "1", "--channel", "c"}, "give dead letter ids or --channel, not both"},
		{[]string{"discard", "1", "--since", "1h"}, "--since goes with --channel"},
		{[]string{"list", "--limit", "0"}, "--limit 0: must be at least 1"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			t.Parallel()
			args := append([]string{"dead"}, tc.args...)
			if len(tc.args) > 0 {
				args = append(args, "--database-url", nowhere)
			}
			code, out, errOut := cliMain(args...)
			assert.Equal(t, 2, code, errOut)
			assert.Empty(t, out)
			assert.Contains(t, errOut, tc.want)
		})
	}
}

// A dead letter's priority, when not 0, in `dead show` (a row), `dead list`
// (a PRIORITY column, there when a listed letter has one) and both --json
// forms ("priority", left out for 0).
func TestDeadShowsPriority(t *testing.T) {
	t.Parallel()
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('urgent', 'SELECT length($1)')`)
	d.Exec(`INSERT INTO pgrelay.dead_letters (id, origin_id, channel, payload, attempts, last_error, outcome, ended_at, node, priority)
		VALUES (1, 1, 'urgent', 'high', 5, 'boom', 'gave_up', now() - interval '1 minute', 0, 7),
		       (2, 2, 'urgent', 'plain', 5, 'boom', 'gave_up', now(), 0, NULL)`)

	code, out, errOut := cliMain("dead", "show", "1", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Regexp(t, `(?m)^priority\s+7$`, out)
	code, out, errOut = cliMain("dead", "show", "2", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "priority")

	code, out, errOut = cliMain("dead", "list", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.Len(t, lines(out), 3, out)
	require.Regexp(t, `^ID\s+ORIGIN\s+CHANNEL\s+OUTCOME\s+ATTEMPTS\s+PRIORITY\s+ENDED\s+NODE\s+LAST ERROR`, lines(out)[0])
	require.Regexp(t, `^2\s+2\s+urgent\s+gave_up\s+5\s+0\s+`, lines(out)[1])
	require.Regexp(t, `^1\s+1\s+urgent\s+gave_up\s+5\s+7\s+`, lines(out)[2])
	code, out, errOut = cliMain("dead", "list", "--limit", "1", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	require.NotContains(t, out, "PRIORITY", "no column when no listed letter has a priority")

	code, out, errOut = cliMain("dead", "list", "--json", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	var listed []map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &listed), out)
	require.Len(t, listed, 2)
	require.NotContains(t, listed[0], "priority")
	require.EqualValues(t, 7, listed[1]["priority"])
	code, out, errOut = cliMain("dead", "show", "--json", "1", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	var shown map[string]any
	require.NoError(t, json.Unmarshal([]byte(out), &shown), out)
	require.EqualValues(t, 7, shown["priority"])
}
