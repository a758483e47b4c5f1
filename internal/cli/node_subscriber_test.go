package cli_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// nodeSubscriberDir is the Node.js subscriber (docs/events.md's JavaScript
// example, subscriber.mjs, and the harness run.mjs). `make deps-node` runs
// npm ci there.
const nodeSubscriberDir = "testdata/node-subscriber"

// nodeReceived is one line of run.mjs: an event as a JavaScript program
// holds it.
type nodeReceived struct {
	Seq   uint64            `json:"seq"`
	Doc   map[string]any    `json:"doc"`
	Attrs map[string]string `json:"attrs"`
}

// A Node.js program with the official NATS clients (@nats-io/jetstream,
// @nats-io/transport-node) follows a run in which the Processor is killed
// with SIGKILL and the NATS server restarts: every log row reaches it once,
// its ids exactly as the log has them as text (JSON.parse rounds 63-bit
// numbers; schema 2's are strings), with its CloudEvents attributes.
func TestNodeSubscriber(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("no node: the Node.js subscriber test needs Node.js (make deps-node)")
	}
	dir, err := filepath.Abs(nodeSubscriberDir)
	require.NoError(t, err)
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "@nats-io", "jetstream")); err != nil {
		t.Skip("the Node.js subscriber's packages are not installed: make deps-node (npm ci in " + nodeSubscriberDir + ")")
	}
	n, js := startNATS(t)
	d := newDB(t)
	d.Exec(`INSERT INTO pgrelay.settings (cluster_name) VALUES ('node-test')`)
	d.Exec(`SELECT pgrelay.register('ok', 'SELECT length($1)', p_publish_enqueued := true)`)
	d.Exec(`CREATE FUNCTION public.gw(p text) RETURNS void LANGUAGE plpgsql AS
	$$ BEGIN RAISE EXCEPTION 'payment gateway timed out'; END $$`)
	d.Exec(`SELECT pgrelay.register('bad', 'SELECT public.gw($1)', p_max_attempts := 2, p_retry_delay := '10 milliseconds')`)
	args := []string{"run", "--database-url", d.URL, "--nats-url", n.URL(), "--nats-publish-batch", "50",
		"--nats-publish-interval", "50ms", "--heartbeat-interval", "200ms", "--dead-after", "1s"}
	first := startCLI(t, nil, args...)
	testenv.Eventually(t, 60*time.Second, "the events stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") >= 0 || first.exited()
	})
	require.False(t, first.exited(), "the processor exited on its own")

	sub := exec.Command(node, "run.mjs")
	sub.Dir = dir
	sub.Env = append(os.Environ(), "NATS_URL="+n.URL(), "DURABLE=node")
	stdin, err := sub.StdinPipe()
	require.NoError(t, err)
	out, errOut := &syncBuffer{}, &syncBuffer{}
	sub.Stdout, sub.Stderr = out, errOut
	sub.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	require.NoError(t, sub.Start())
	exited := make(chan struct{})
	var subErr error
	go func() {
		subErr = sub.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = sub.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("node run.mjs stderr:\n%s", tail(errOut.String()))
		}
	})
	testenv.Eventually(t, 60*time.Second, "the Node.js subscriber's durable consumer", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.Consumer(ctx, "PGRELAY_EVENTS", "node")
		return err == nil || isClosed(exited)
	})
	require.False(t, isClosed(exited), "node exited: %s", errOut.String())
	// docs/events.md's Go subscriber beside it.
	var mu sync.Mutex
	goGot := map[int64]string{}
	cc, err := consume(context.Background(), js, "go", func(doc *pgrelay.LogDocument, ceType string) error {
		mu.Lock()
		defer mu.Unlock()
		goGot[doc.ID] = ceType
		return nil
	})
	require.NoError(t, err)
	t.Cleanup(cc.Stop)

	// The Processor killed in the middle of the run.
	d.Exec(`SELECT pgrelay.notify_many('ok', ARRAY(SELECT 'a' || g FROM generate_series(1, 600) g))`)
	d.Exec(`SELECT pgrelay.notify_many('bad', ARRAY(SELECT 'b' || g FROM generate_series(1, 10) g))`)
	testenv.Eventually(t, 60*time.Second, "some events published", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") > 50 || first.exited()
	})
	first.signal(syscall.SIGKILL)
	require.Equal(t, -1, first.wait(10*time.Second), "killed by the signal")
	d.Exec(`SELECT pgrelay.notify_many('ok', ARRAY(SELECT 'c' || g FROM generate_series(1, 300) g))`)
	second := startCLI(t, nil, args...)

	// NATS restarted while events are dispatched.
	published := streamMsgs(js, "PGRELAY_EVENTS")
	testenv.Eventually(t, 60*time.Second, "the second processor to publish", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") > published || second.exited()
	})
	n.Shutdown()
	d.Exec(`SELECT pgrelay.notify_many('ok', ARRAY(SELECT 'd' || g FROM generate_series(1, 200) g))`)
	testenv.Eventually(t, 60*time.Second, "dispatch to go on without NATS", func() bool {
		return d.Count(`SELECT count(*) FROM pgrelay.queue`) == 0 || second.exited()
	})
	require.NoError(t, n.Start())
	testenv.Eventually(t, 120*time.Second, "every log row in the stream", func() bool {
		return streamMsgs(js, "PGRELAY_EVENTS") == d.Count(`SELECT count(*) FROM pgrelay.log`) || second.exited()
	})
	require.False(t, second.exited(), "the processor exited on its own")

	// The log as text: what the subscriber must have received.
	type row struct{ queueID, originID, channel, event string }
	want := map[string]row{}
	for _, l := range lines(d.Text(`SELECT string_agg(concat_ws(' ', id::text, queue_id::text, origin_id::text, channel, event), E'\n')
		FROM pgrelay.log`)) {
		f := strings.Fields(l)
		want[f[0]] = row{f[1], f[2], f[3], f[4]}
	}
	require.Greater(t, len(want), 1100)
	_, err = fmt.Fprintf(stdin, "want %d\n", len(want))
	require.NoError(t, err)
	select {
	case <-exited:
		require.NoError(t, subErr, "node run.mjs: %s", errOut.String())
	case <-time.After(120 * time.Second):
		t.Fatalf("the Node.js subscriber did not receive the %d events within 2 minutes (%d lines)", len(want),
			len(lines(out.String())))
	}

	seqOf := map[string]uint64{} // id -> the stream message that carried it
	type firstMsg struct {
		seq            uint64
		channel, event string
	}
	firstOf := map[string]firstMsg{} // origin_id -> its first message
	sc := bufio.NewScanner(strings.NewReader(out.String()))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var r nodeReceived
		require.NoError(t, json.Unmarshal(sc.Bytes(), &r), sc.Text())
		id, ok := r.Doc["id"].(string)
		require.True(t, ok, "schema 2: the id is a string: %s", sc.Text())
		if s, dup := seqOf[id]; dup {
			// Redelivered (at least once), never stored twice.
			require.Equal(t, s, r.Seq, "log row %s in two stream messages", id)
			continue
		}
		seqOf[id] = r.Seq
		if f, ok := firstOf[r.Doc["origin_id"].(string)]; !ok || r.Seq < f.seq {
			firstOf[r.Doc["origin_id"].(string)] = firstMsg{r.Seq, r.Doc["channel"].(string), r.Doc["event"].(string)}
		}
		w, ok := want[id]
		require.True(t, ok, "id %s is no log row (rounded?): %s", id, sc.Text())
		require.Equal(t, w.queueID, r.Doc["queue_id"], sc.Text())
		require.Equal(t, w.originID, r.Doc["origin_id"], sc.Text())
		require.Equal(t, w.channel, r.Doc["channel"], sc.Text())
		require.Equal(t, w.event, r.Doc["event"], sc.Text())
		if w.event == "gave_up" || w.event == "failed" {
			require.Equal(t, "sqlstate_P0001", r.Doc["error_class"], sc.Text())
		}
		require.Equal(t, map[string]string{
			"ce-specversion": "1.0", "ce-id": id, "ce-source": "pgrelay://node-test/node/0",
			"ce-type": "dev.pgrelay.event." + w.event, "ce-time": r.Attrs["ce-time"], "ce-subject": w.channel,
			"content-type": "application/json",
		}, r.Attrs)
		at, err := time.Parse(time.RFC3339Nano, r.Doc["at"].(string))
		require.NoError(t, err)
		ceTime, err := time.Parse(time.RFC3339Nano, r.Attrs["ce-time"])
		require.NoError(t, err)
		require.True(t, at.Equal(ceTime), sc.Text())
	}
	require.NoError(t, sc.Err())
	require.Len(t, seqOf, len(want), "every log row once")
	testenv.Eventually(t, 60*time.Second, "the Go subscriber to get every event", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(goGot) >= len(want)
	})
	mu.Lock()
	for id, ceType := range goGot {
		w, ok := want[strconv.FormatInt(id, 10)]
		require.True(t, ok, "the Go subscriber got id %d, no log row", id)
		require.Equal(t, "dev.pgrelay.event."+w.event, ceType)
	}
	mu.Unlock()
	// One node: each event of the channel publishing enqueued events came
	// first as its enqueued document, whatever the faults.
	origins := 0
	for origin, f := range firstOf {
		if f.channel == "ok" {
			origins++
			require.Equal(t, "enqueued", f.event, "the first message of event %s", origin)
		}
	}
	require.Equal(t, 1100, origins)

	second.signal(syscall.SIGTERM)
	require.Equal(t, 0, second.wait(60*time.Second))
}

func isClosed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}
