package cli_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay"
)

// consume is docs/events.md's Go subscriber, as it is shown there
// (TestEventsDocExamples keeps the two the same); TestNodeSubscriber runs it
// beside the Node.js one.
func consume(ctx context.Context, js jetstream.JetStream, durable string,
	handle func(doc *pgrelay.LogDocument, ceType string) error) (jetstream.ConsumeContext, error) {
	cons, err := js.CreateOrUpdateConsumer(ctx, "PGRELAY_EVENTS", jetstream.ConsumerConfig{
		Durable:       durable, // remembers what it acknowledged across restarts
		FilterSubject: "pgrelay.events.>",
		AckPolicy:     jetstream.AckExplicitPolicy,
	})
	if err != nil {
		return nil, err
	}
	return cons.Consume(func(m jetstream.Msg) {
		ev, err := pgrelay.ParseEvent(m.Data()) // schema 1 or 2
		if err != nil || ev.Log == nil {
			_ = m.Term() // not a pgrelay log event: never redeliver
			return
		}
		// ce-type: dev.pgrelay.event.<event>; ce-source names the installation.
		if err := handle(ev.Log, m.Headers().Get("ce-type")); err != nil { // idempotent on ev.Log.ID
			_ = m.Nak()
			return
		}
		_ = m.Ack()
	})
}

// The subscriber examples of docs/events.md are the code the tests run:
// the Go one is consume above, the JavaScript one subscriber.mjs.
func TestEventsDocExamples(t *testing.T) {
	t.Parallel()
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "events.md"))
	require.NoError(t, err)
	blocks := map[string][]string{}
	for _, m := range regexp.MustCompile("(?s)```(go|js)\n(.*?)```").FindAllStringSubmatch(string(doc), -1) {
		blocks[m[1]] = append(blocks[m[1]], m[2])
	}

	src, err := os.ReadFile("subscriber_example_test.go")
	require.NoError(t, err)
	fn := regexp.MustCompile(`(?s)\nfunc consume\(.*?\n}\n`).FindString(string(src))
	require.NotEmpty(t, fn)
	require.Contains(t, blocks["go"], strings.TrimPrefix(fn, "\n"), "docs/events.md shows consume as it is")

	js, err := os.ReadFile(filepath.Join(nodeSubscriberDir, "subscriber.mjs"))
	require.NoError(t, err)
	require.Contains(t, blocks["js"], string(js), "docs/events.md shows subscriber.mjs as it is")
}
