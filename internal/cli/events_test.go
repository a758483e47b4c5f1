package cli_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// Status events on NATS through the command line: `pgrelay run --nats-url`
// killed in the middle of publishing, `pgrelay stats` showing the backlog,
// and `pgrelay watch`.

func startNATS(t *testing.T) (*devenv.NATS, jetstream.JetStream) {
	t.Helper()
	n, err := devenv.StartNATS(devenv.NATSConfig{})
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	nc, err := nats.Connect(n.URL())
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	return n, js
}

func streamMsgs(js jetstream.JetStream, stream string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return -1
	}
	info, err := s.Info(ctx)
	if err != nil {
		return -1
	}
	return int(info.State.Msgs)
}

// streamLogIDs reads every message of the events stream and returns the log
// ids they carry, in stream order.
func streamLogIDs(t *testing.T, js jetstream.JetStream) []int64 {
	t.Helper()
	ctx := context.Background()
	want := streamMsgs(js, "PGRELAY_EVENTS")
	cons, err := js.OrderedConsumer(ctx, "PGRELAY_EVENTS", jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{"pgrelay.events.>"}})
	require.NoError(t, err)
	var ids []int64
	for len(ids) < want {
		batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
		require.NoError(t, err)
		n := 0
		for m := range batch.Messages() {
			n++
			var doc events.Published
			require.NoError(t, json.Unmarshal(m.Data(), &doc))
			require.Equal(t, strconv.FormatInt(doc.ID, 10), m.Headers().Get(jetstream.MsgIDHeader))
			ids = append(ids, doc.ID)
		}
		require.Positive(t, n, "read %d of %d messages", len(ids), want)
	}
	return ids
}

// The Processor killed with SIGKILL in the middle of publishing: a batch is
// in the stream but the cursor was not moved (its update was held back by a
// lock). The next Processor publishes that batch again from the cursor and
// JetStream drops the copies: still exactly one message per log row. While
// no Processor runs, `pgrelay stats` shows the backlog.
func TestRunEventsKilledMidPublish(t *testing.T) {
	t.Parallel()
	n, js := startNATS(t)
	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('k', 'SELECT length($1)')`)
	args := []string{"run", "--database-url", d.URL, "--nats-url", n.URL(), "--nats-publish-batch", "100",
		"--nats-publish-interval", "50ms", "--heartbeat-interval", "200ms", "--dead-after", "1s", "--metrics-addr", "127.0.0.1:0"}
	first := startCLI(t, nil, args...)
	// Both cursors (the log's and the notifier's): the publisher creates
	// them one after the other, and one still missing would wait for the
	// lock below before anything is published.
	testenv.Eventually(t, 60*time.Second, "the publisher's cursors", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.publish_cursors WHERE source IN ('log', 'notifier')`) == 2 || first.exited()
	})
	require.False(t, first.exited(), "the processor exited on its own")

	// Cursor updates wait for this lock; it takes no transaction id, so it
	// does not hold the publisher's horizon back.
	ctx := context.Background()
	lock, err := pgx.Connect(ctx, d.URL)
	require.NoError(t, err)
	defer lock.Close(ctx)
	tx, err := lock.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `LOCK TABLE pgrelay.publish_cursors IN EXCLUSIVE MODE`)
	require.NoError(t, err)

	d.Exec(`SELECT pgrelay.notify_many('k', ARRAY(SELECT 'k' || g FROM generate_series(1, 2000) g))`)
	publisherWaits := func() int {
		return d.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name = 'pgrelay-publisher' AND wait_event_type = 'Lock'`)
	}
	testenv.Eventually(t, 60*time.Second, "a batch in the stream and its cursor update waiting", func() bool {
		return (publisherWaits() == 1 && streamMsgs(js, "PGRELAY_EVENTS") > 0) || first.exited()
	})
	require.False(t, first.exited(), "the processor exited on its own")
	first.signal(syscall.SIGKILL)
	assert.Equal(t, -1, first.wait(10*time.Second), "killed by the signal")
	// The killed process's session would end when its lock wait did; end it
	// now, as a dropped connection does, then let go of the lock.
	d.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database()
		AND application_name = 'pgrelay-publisher'`)
	require.NoError(t, tx.Rollback(ctx))
	// Its last handler transactions, already sent, end on their own.
	testenv.Eventually(t, 30*time.Second, "the killed processor's sessions to end", func() bool {
		return d.Count(`SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
			AND application_name LIKE 'pgrelay%'`) == 0
	})
	require.Equal(t, 0, d.Count(`SELECT last_id FROM pgrelay.publish_cursors WHERE source = 'log'`),
		"the acknowledged batch is not recorded")
	inFlight := streamMsgs(js, "PGRELAY_EVENTS")
	require.Positive(t, inFlight)
	t.Logf("killed with %d events in the stream and none recorded as published", inFlight)

	// No Processor runs: stats shows what waits to be published.
	logRows := d.Count(`SELECT count(*) FROM pgrelay.log`)
	require.Positive(t, logRows)
	code, out, errOut := cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^unpublished events \(node 0\): `+strconv.Itoa(logRows)+`, the oldest \S+ old$`, out)

	second := startCLI(t, nil, args...)
	testenv.Eventually(t, 90*time.Second, "every event to run and be published", func() bool {
		total := d.Count(`SELECT count(*) FROM pgrelay.log`)
		return (d.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 2000 &&
			streamMsgs(js, "PGRELAY_EVENTS") == total) || second.exited()
	})
	require.False(t, second.exited(), "the second processor exited on its own")
	// It published the killed one's batch again, and JetStream dropped it.
	addr := regexp.MustCompile(`msg="serving metrics" addr=(\S+)`).FindStringSubmatch(second.stderr.String())
	require.NotNil(t, addr, second.stderr.String())
	// The counter moves after the acks that the stream count already shows.
	dupRe := regexp.MustCompile(`(?m)^pgrelay_events_duplicates_total (\d+)$`)
	var dups []string
	testenv.Eventually(t, 10*time.Second, "the duplicates counter", func() bool {
		resp, err := http.Get("http://" + addr[1] + "/metrics")
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		require.NoError(t, err)
		dups = dupRe.FindStringSubmatch(string(body))
		return dups != nil && dups[1] == strconv.Itoa(inFlight)
	})
	second.signal(syscall.SIGTERM)
	require.Equal(t, 0, second.wait(60*time.Second))

	ids := streamLogIDs(t, js)
	want := d.IDs(`SELECT id FROM pgrelay.log ORDER BY id`)
	require.Len(t, ids, len(want), "one stream message per log row")
	seen := map[int64]bool{}
	for _, id := range ids {
		require.False(t, seen[id], "log row %d twice in the stream", id)
		seen[id] = true
	}
	for _, id := range want {
		require.True(t, seen[id], "log row %d missing from the stream", id)
	}
	code, out, errOut = cliMain("stats", "--database-url", d.URL)
	require.Equal(t, 0, code, errOut)
	assert.Regexp(t, `(?m)^unpublished events \(node 0\): 0$`, out)
}

// `pgrelay watch` prints the events of a short run: as JSON, as lines, for
// one channel, and from a log id on.
func TestWatch(t *testing.T) {
	t.Parallel()
	n, js := startNATS(t)
	d := newDB(t)
	d.Exec(`CREATE FUNCTION public.nope(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'nope: %', p; END $$`)
	d.Exec(`SELECT pgrelay.register('w1', 'SELECT length($1)')`)
	d.Exec(`SELECT pgrelay.register('w2', 'SELECT public.nope($1)', p_max_attempts := 1, p_publish_payload := true,
		p_publish_errors := 'text')`)
	run := startCLI(t, nil, "run", "--database-url", d.URL, "--nats-url", n.URL(), "--nats-publish-interval", "50ms")
	d.Exec(`SELECT pgrelay.notify_many('w1', ARRAY(SELECT 'a' || g FROM generate_series(1, 10) g))`)
	d.Exec(`SELECT pgrelay.notify_many('w2', ARRAY['b1', 'b2'])`)
	testenv.Eventually(t, 60*time.Second, "12 events in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 12 || run.exited()
	})
	require.False(t, run.exited())
	logIDs := d.IDs(`SELECT id FROM pgrelay.log ORDER BY id`)
	require.Len(t, logIDs, 12)

	// JSON, replayed from the stream, then live.
	w := startCLI(t, nil, "watch", "--nats-url", n.URL(), "--json", "--since", "1h")
	testenv.Eventually(t, 30*time.Second, "watch to print the 12 stored events", func() bool {
		return len(nonEmpty(w.stdout.String())) >= 12 || w.exited()
	})
	d.Exec(`SELECT pgrelay.notify('w1', 'live')`)
	testenv.Eventually(t, 30*time.Second, "watch to print the live event", func() bool {
		return len(nonEmpty(w.stdout.String())) >= 13 || w.exited()
	})
	w.signal(syscall.SIGINT)
	require.Equal(t, 0, w.wait(30*time.Second))
	var got []int64
	for _, l := range nonEmpty(w.stdout.String()) {
		var doc map[string]json.RawMessage
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		for _, f := range []string{"schema", "id", "queue_id", "origin_id", "channel", "attempt", "event", "error", "node", "at"} {
			require.Contains(t, doc, f)
		}
		require.Equal(t, "2", string(doc["schema"]))
		id, err := events.ParseID(doc["id"])
		require.NoError(t, err)
		require.Equal(t, `"`+strconv.FormatInt(id, 10)+`"`, string(doc["id"]), "schema 2: ids are strings")
		got = append(got, id)
	}
	want := d.IDs(`SELECT id FROM pgrelay.log ORDER BY id`)
	require.Len(t, got, 13)
	require.ElementsMatch(t, want, got)

	// jq reads each id exactly (jq 1.6 rounds a 63-bit number), compared
	// with the log as text.
	t.Run("jq", func(t *testing.T) {
		jq, err := exec.LookPath("jq")
		if err != nil {
			t.Skip("jq is not installed: apt-get install jq")
		}
		cmd := exec.Command(jq, "-r", ".id, .queue_id, .origin_id")
		cmd.Stdin = strings.NewReader(w.stdout.String())
		out, err := cmd.Output()
		require.NoError(t, err)
		text := strings.Fields(d.Text(`SELECT string_agg(v, ' ') FROM pgrelay.log,
			LATERAL (VALUES (id::text), (queue_id::text), (origin_id::text)) x(v)`))
		require.ElementsMatch(t, text, nonEmpty(string(out)))
	})

	// Lines, one channel, exiting after two.
	code, out, errOut := runCLI(t, nil, "watch", "--nats-url", n.URL(), "--channel", "w2", "--since", "1h", "--limit", "2")
	require.Equal(t, 0, code, errOut)
	ls := nonEmpty(out)
	require.Len(t, ls, 2, out)
	line := regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} +w2 +gave_up +id=\d+ origin=\d+ attempt=1 node=0 error_class=sqlstate_P0001 error=".*nope: b\d.*" payload="b\d"$`)
	for _, l := range ls {
		assert.Regexp(t, line, l)
	}

	// From a log id on: the events from the 6th row.
	code, out, errOut = runCLI(t, nil, "watch", "--nats-url", n.URL(), "--json", "--since-id",
		strconv.FormatInt(logIDs[5], 10), "--limit", "3")
	require.Equal(t, 0, code, errOut)
	ls = nonEmpty(out)
	require.Len(t, ls, 3, out)
	for i, l := range ls {
		var doc events.Published
		require.NoError(t, json.Unmarshal([]byte(l), &doc))
		require.Equal(t, logIDs[5+i], doc.ID)
	}

	// One event kind: the 11 successes (the 10 of w1 and the live one),
	// none of the 2 failures stored among them.
	code, out, errOut = runCLI(t, nil, "watch", "--nats-url", n.URL(), "--json", "--event", "succeeded",
		"--since", "1h", "--limit", "11")
	require.Equal(t, 0, code, errOut)
	ls = nonEmpty(out)
	require.Len(t, ls, 11, out)
	for _, l := range ls {
		var doc struct{ Channel, Event string }
		require.NoError(t, json.Unmarshal([]byte(l), &doc))
		require.Equal(t, "succeeded", doc.Event, l)
		require.Equal(t, "w1", doc.Channel, l)
	}

	// From an RFC 3339 time on: only what was stored after it.
	testenv.Eventually(t, 30*time.Second, "13 events in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 13 || run.exited()
	})
	mark := time.Now().UTC().Format(time.RFC3339Nano)
	d.Exec(`SELECT pgrelay.notify('w1', 'after-mark')`)
	testenv.Eventually(t, 30*time.Second, "14 events in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == 14 || run.exited()
	})
	code, out, errOut = runCLI(t, nil, "watch", "--nats-url", n.URL(), "--json", "--since", mark, "--limit", "1")
	require.Equal(t, 0, code, errOut)
	ls = nonEmpty(out)
	require.Len(t, ls, 1, out)
	var doc events.Published
	require.NoError(t, json.Unmarshal([]byte(ls[0]), &doc))
	all := d.IDs(`SELECT id FROM pgrelay.log ORDER BY id`)
	require.Equal(t, all[len(all)-1], doc.ID, "the event stored after %s", mark)

	run.signal(syscall.SIGTERM)
	require.Equal(t, 0, run.wait(60*time.Second))

	t.Run("errors", func(t *testing.T) {
		code, _, errOut := cliMain("watch", "--nats-url", "nats://127.0.0.1:1", "--connect-timeout", "300ms",
			"--log-level", "error")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "cannot connect to NATS at nats://127.0.0.1:1")
		code, _, errOut = cliMain("watch", "--since", "yesterday-ish")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "--since")
		code, _, errOut = cliMain("watch", "--channel", "a.b")
		assert.Equal(t, 2, code)
		assert.Contains(t, errOut, "--channel")
		core, err := devenv.StartNATS(devenv.NATSConfig{NoJetStream: true})
		require.NoError(t, err)
		defer core.Stop()
		code, _, errOut = cliMain("watch", "--nats-url", core.URL(), "--since", "1h", "--log-level", "error")
		assert.Equal(t, 1, code)
		assert.Contains(t, errOut, "no JetStream")
	})
}

// nonEmpty is s's non-empty lines.
func nonEmpty(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// `pgrelay dev` runs a NATS server with JetStream, prints its URL, and
// `pgrelay watch` follows the demo's events there out of the box.
func TestDevWatch(t *testing.T) {
	t.Parallel()
	tmp, err := os.MkdirTemp("", "pgrelay-cli-devwatch-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(tmp) })
	require.NoError(t, os.Chmod(tmp, 0o755)) // reachable by the postgres OS user when running as root
	dev := startCLI(t, []string{"TMPDIR=" + tmp}, "dev", "--rate", "50", "--refresh", "200ms",
		"--heartbeat-interval", "200ms")
	shown := regexp.MustCompile(`(?m)^nats: (nats://127\.0\.0\.1:\d+) \(follow the events: \S*(?:pgrelay|\.test) watch( --nats-url nats://127\.0\.0\.1:\d+)?\)$`)
	var m []string
	testenv.Eventually(t, 90*time.Second, "dev to print its NATS URL", func() bool {
		m = shown.FindStringSubmatch(dev.stdout.String())
		return m != nil || dev.exited()
	})
	require.False(t, dev.exited(), "dev exited on its own")
	// Without --nats-url when dev got NATS's default port, as printed.
	args := []string{"watch", "--json", "--since", "1h", "--limit", "5"}
	if m[2] != "" {
		args = append(args, "--nats-url", m[1])
	}
	code, out, errOut := runCLI(t, nil, args...)
	require.Equal(t, 0, code, errOut)
	ls := nonEmpty(out)
	require.Len(t, ls, 5, out)
	for _, l := range ls {
		var doc struct {
			Channel string
			Event   string
		}
		require.NoError(t, json.Unmarshal([]byte(l), &doc), l)
		require.True(t, strings.HasPrefix(doc.Channel, "demo_"), l)
	}
	dev.signal(syscall.SIGINT)
	require.Equal(t, 0, dev.wait(60*time.Second))
}

// NATS flags a Processor cannot use are usage errors, from the command line
// or the environment.
func TestRunNATSFlagErrors(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		env  []string
		args []string
		want string
	}{
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-publish-batch", "0"}, "--nats-publish-batch 0"},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-publish-batch", "5000"}, "--nats-publish-batch 5000"},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-tls-cert", "c.pem"}, "--nats-tls-cert and --nats-tls-key"},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-max-age", "-1h"}, "--nats-max-age"},
		{[]string{"PGRELAY_NATS_URL=nats://x:4222", "PGRELAY_NATS_PUBLISH_INTERVAL=0s"}, nil, "--nats-publish-interval"},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-stream", "a.b"}, "stream name"},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-retention", "workqueue"}, "--nats-retention \"workqueue\""},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-max-bytes", "-1"}, "--nats-max-bytes"},
		{nil, []string{"--nats-url", "nats://x:4222", "--nats-replicas", "6"}, "--nats-replicas 6: expected 1..5"},
		{[]string{"PGRELAY_NATS_URL=nats://x:4222", "PGRELAY_NATS_REPLICAS=-1"}, nil, "--nats-replicas -1"},
	} {
		args := append([]string{"run", "--database-url", "postgres://127.0.0.1:1/x"}, c.args...)
		var code int
		var errOut string
		if c.env == nil {
			code, _, errOut = cliMain(args...)
		} else {
			code, _, errOut = runCLI(t, c.env, args...)
		}
		assert.Equal(t, 2, code, "%v %v: %s", c.env, c.args, errOut)
		assert.Contains(t, errOut, c.want, "%v %v", c.env, c.args)
	}
}

// `pgrelay run` against a NATS server that requires TLS with client
// certificates: the --nats-tls-* flags reach the connection, and the stream
// flags (--nats-stream, --nats-max-age, --nats-retention, --nats-max-bytes)
// reach the stream the publisher creates, which receives the events.
func TestRunNATSTLSAndStreamFlags(t *testing.T) {
	t.Parallel()
	pki, err := devenv.NewNATSTLS(t.TempDir())
	require.NoError(t, err)
	n, err := devenv.StartNATS(devenv.NATSConfig{TLS: pki})
	require.NoError(t, err)
	t.Cleanup(n.Stop)
	nc, err := nats.Connect(n.URL(), nats.ClientCert(pki.ClientCert, pki.ClientKey), nats.RootCAs(pki.CA))
	require.NoError(t, err)
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)

	d := newDB(t)
	d.Exec(`SELECT pgrelay.register('t', 'SELECT length($1)')`)
	run := startCLI(t, []string{"PGRELAY_NATS_TLS_CA=" + pki.CA}, "run", "--database-url", d.URL,
		"--nats-url", n.URL(), "--nats-tls-cert", pki.ClientCert, "--nats-tls-key", pki.ClientKey,
		"--nats-stream", "TLS_EVENTS", "--nats-max-age", "2h", "--nats-retention", "limits",
		"--nats-max-bytes", "10000000", "--nats-publish-interval", "50ms")
	d.Exec(`SELECT pgrelay.notify_many('t', ARRAY(SELECT 't' || g FROM generate_series(1, 30) g))`)
	testenv.Eventually(t, 60*time.Second, "30 events in the stream TLS_EVENTS", func() bool {
		return streamMsgs(js, "TLS_EVENTS") == 30 || run.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	s, err := js.Stream(context.Background(), "TLS_EVENTS")
	require.NoError(t, err)
	cfg := s.CachedInfo().Config
	assert.Equal(t, []string{"pgrelay.>"}, cfg.Subjects)
	assert.Equal(t, 2*time.Hour, cfg.MaxAge)
	assert.Equal(t, jetstream.LimitsPolicy, cfg.Retention)
	assert.Equal(t, int64(10000000), cfg.MaxBytes)
	assert.Equal(t, -1, streamMsgs(js, "PGRELAY_EVENTS"), "no default stream")
	run.signal(syscall.SIGTERM)
	require.Equal(t, 0, run.wait(60*time.Second))

	// Restarted with --nats-retention interest and another size: the
	// existing stream is reconciled. It has no consumer, so the server drops
	// the 30 messages it held (the warning in docs/events.md).
	run = startCLI(t, nil, "run", "--database-url", d.URL, "--nats-url", n.URL(), "--nats-tls-cert", pki.ClientCert,
		"--nats-tls-key", pki.ClientKey, "--nats-tls-ca", pki.CA, "--nats-stream", "TLS_EVENTS",
		"--nats-retention", "interest", "--nats-max-bytes", "20000000")
	testenv.Eventually(t, 60*time.Second, "the stream reconciled", func() bool {
		info, err := s.Info(context.Background())
		return (err == nil && info.Config.Retention == jetstream.InterestPolicy && info.Config.MaxBytes == 20000000) ||
			run.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	info, err := s.Info(context.Background())
	require.NoError(t, err)
	assert.Equal(t, 2*time.Hour, info.Config.MaxAge, "kept: not given")
	testenv.Eventually(t, 30*time.Second, "the messages dropped: interest retention without consumers", func() bool {
		return streamMsgs(js, "TLS_EVENTS") == 0
	})
	run.signal(syscall.SIGTERM)
	require.Equal(t, 0, run.wait(60*time.Second))

	// Without the client certificate the server refuses: the Processor runs
	// and says why it cannot connect.
	run = startCLI(t, nil, "run", "--database-url", d.URL, "--nats-url", n.URL(), "--nats-tls-ca", pki.CA)
	testenv.Eventually(t, 60*time.Second, "the refusal logged", func() bool {
		return strings.Contains(run.stderr.String(), "cannot connect to NATS") || run.exited()
	})
	require.False(t, run.exited(), run.stderr.String())
	run.signal(syscall.SIGTERM)
	require.Equal(t, 0, run.wait(60*time.Second))
}

// Messages forged by anyone who can publish under the stream's subjects reach
// the terminal with their control characters escaped, in both output forms.
func TestWatchEscapesControlCharacters(t *testing.T) {
	t.Parallel()
	n, js := startNATS(t)
	ctx := context.Background()
	_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "PGRELAY_EVENTS", Subjects: []string{events.StreamSubjects}})
	require.NoError(t, err)
	forged := [][]byte{
		[]byte("\x1b[2J\x1b[Hnot json\x07\xff"),
		[]byte(`{"schema":1,"id":1,"channel":"c\u001b[31m","event":"succeeded\u009b","at":"2026-12-01T00:00:00Z"}` + "\x1b]0;title\x07"),
	}
	for _, m := range forged {
		_, err := js.Publish(ctx, events.EventsPrefix+".c.succeeded", m)
		require.NoError(t, err)
	}
	for _, args := range [][]string{
		{"watch", "--nats-url", n.URL(), "--since", "1h", "--limit", "2"},
		{"watch", "--nats-url", n.URL(), "--json", "--since", "1h", "--limit", "2"},
	} {
		code, out, errOut := runCLI(t, nil, args...)
		require.Equal(t, 0, code, errOut)
		for _, c := range out {
			if c == '\n' {
				continue
			}
			assert.False(t, c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) || c == utf8.RuneError,
				"%v printed %U raw:\n%q", args, c, out)
		}
		assert.Contains(t, out, `\x1b[2J`, args)
		assert.Contains(t, out, `\x07`, args)
	}
}
