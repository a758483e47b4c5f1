package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/secret"
)

// runWatch follows the status events on NATS: a line per event, or the JSON
// documents as received. With JetStream it reads the events stream through
// an ephemeral ordered consumer, so it can replay from a log id or a time;
// without the stream it subscribes on core NATS (live events only).
func runWatch(ctx context.Context, a *app, args []string) error {
	fs := a.newFlags("watch")
	var n natsFlags
	n.registerConn(fs, "NATS server URL (default "+nats.DefaultURL+", where 'pgrelay dev' runs one)")
	channel := fs.String("channel", "", "only this channel's events")
	event := fs.String("event", "", "only this event: enqueued, succeeded, failed, gave_up, expired, deduplicated, adopted, rescued, retried, discarded, cancelled, snoozed (or a notifier status: queued, sending, sent, failed)")
	asJSON := fs.Bool("json", false, "print each event's JSON document as received, one per line")
	sinceID := fs.Int64("since-id", 0, "replay the stored events from this log id on, then follow (JetStream)")
	since := fs.String("since", "", "replay the stored events from this time on, then follow (JetStream): RFC 3339 (2026-05-04T10:00:00Z) or a duration ago (10m)")
	limit := fs.Int("limit", 0, "exit after this many events (default: follow until interrupted)")
	connectTimeout := fs.Duration("connect-timeout", 5*time.Second, "give up when NATS does not answer within this")
	mkLog := logFlags(fs)
	if err := a.parse(fs, args); err != nil {
		return err
	}
	if n.url == "" {
		n.url = nats.DefaultURL
	}
	for name, v := range map[string]string{"channel": *channel, "event": *event} {
		if v != "" && !events.ValidToken(v) {
			return &usageError{msg: fmt.Sprintf("--%s %q: not a subject token (no '.', '*', '>' or spaces)", name, v)}
		}
	}
	if *sinceID < 0 || *limit < 0 {
		return &usageError{msg: "--since-id and --limit must not be negative"}
	}
	if *sinceID > 0 && *since != "" {
		return &usageError{msg: "--since-id and --since are exclusive"}
	}
	var start time.Time
	switch {
	case *sinceID > 0:
		start = events.ID(*sinceID).Time()
	case *since != "":
		t, err := parseSince(*since, time.Now())
		if err != nil {
			return &usageError{msg: fmt.Sprintf("--since %q: %v", *since, err)}
		}
		start = t
	}
	logger, err := mkLog(a.stderr)
	if err != nil {
		return err
	}
	conn, err := bus.Connect(n.busOptions(logger))
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close() }()
	if err := waitConnected(ctx, conn, *connectTimeout); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("cannot connect to NATS at %s: %w", secret.String(n.url), err)
	}

	filters := []string{
		events.FilterSubject(events.EventsPrefix, *channel, *event),
		events.FilterSubject(events.NotifierPrefix, *channel, *event),
	}
	msgs := make(chan watched, 256)
	stop, err := subscribe(ctx, a, conn, n.stream, filters, start, msgs)
	if err != nil {
		return err
	}
	defer stop()

	w := &watchPrinter{out: a.stdout, json: *asJSON}
	count := 0
	for {
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			if *sinceID > 0 && m.id() < *sinceID {
				continue // stored after --since-id's time, but an older event
			}
			w.print(m)
			count++
			if *limit > 0 && count >= *limit {
				return nil
			}
		}
	}
}

// watched is one received message.
type watched struct {
	subject string
	data    []byte
	doc     watchDoc
	ok      bool // data is a pgrelay document
}

func (w watched) id() int64 { return int64(w.doc.ID) }

// watchDoc has the fields of both kinds of documents (events.Published and
// events.NotifierStatus).
type watchDoc struct {
	Schema         int       `json:"schema"`
	ID             docID     `json:"id"`
	QueueID        docID     `json:"queue_id"`
	OriginID       docID     `json:"origin_id"`
	Channel        string    `json:"channel"`
	Attempt        int       `json:"attempt"`
	Event          string    `json:"event"`
	Error          *string   `json:"error"`
	ErrorClass     string    `json:"error_class"`
	Node           int       `json:"node"`
	At             time.Time `json:"at"`
	Priority       int       `json:"priority"`
	Payload        *string   `json:"payload"`
	PayloadOmitted bool      `json:"payload_omitted"`
	NotificationID docID     `json:"notification_id"`
	Status         string    `json:"status"`
}

// docID is an id of a document of either schema: a JSON number (schema 1)
// or string (schema 2).
type docID int64

func (d *docID) UnmarshalJSON(b []byte) error {
	v, err := events.ParseID(b)
	*d = docID(v)
	return err
}

func newWatched(subject string, data []byte) watched {
	w := watched{subject: subject, data: data}
	w.ok = json.Unmarshal(data, &w.doc) == nil && w.doc.ID != 0
	return w
}

var errNoJetStream = errors.New("the NATS server has no JetStream: replaying (--since-id, --since) needs it")

// subscribe delivers the messages on filters to out until stop is called.
func subscribe(ctx context.Context, a *app, conn *bus.Conn, stream string, filters []string, start time.Time,
	out chan<- watched) (stop func(), err error) {
	deliver := func(subject string, data []byte) {
		select {
		case out <- newWatched(subject, data):
		case <-ctx.Done():
		}
	}
	js, err := conn.JetStreamEnabled(ctx)
	if err != nil {
		return nil, err
	}
	if js {
		cfg := jetstream.OrderedConsumerConfig{FilterSubjects: filters, DeliverPolicy: jetstream.DeliverNewPolicy}
		if !start.IsZero() {
			cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &start
		}
		// The stream appears with the first Processor that publishes here.
		told := false
		for {
			cons, err := conn.JetStream().OrderedConsumer(ctx, stream, cfg)
			switch {
			case err == nil:
				cc, err := cons.Consume(func(m jetstream.Msg) { deliver(m.Subject(), m.Data()) })
				if err != nil {
					return nil, fmt.Errorf("consume stream %s: %w", stream, err)
				}
				return cc.Stop, nil
			case !errors.Is(err, jetstream.ErrStreamNotFound):
				return nil, fmt.Errorf("follow stream %s: %w", stream, err)
			}
			if !told {
				fmt.Fprintf(a.stderr, "pgrelay watch: waiting for stream %s (created by the first 'pgrelay run --nats-url' publishing here; --nats-stream names another)\n", stream)
				told = true
			}
			select {
			case <-ctx.Done():
				return func() {}, nil
			case <-time.After(250 * time.Millisecond):
			}
		}
	}
	if !start.IsZero() {
		return nil, errNoJetStream
	}
	nc := conn.NATS()
	var subs []*nats.Subscription
	stop = func() {
		for _, s := range subs {
			_ = s.Unsubscribe()
		}
	}
	for _, f := range filters {
		s, err := nc.Subscribe(f, func(m *nats.Msg) { deliver(m.Subject, m.Data) })
		if err != nil {
			stop()
			return nil, fmt.Errorf("subscribe to %s: %w", f, err)
		}
		subs = append(subs, s)
	}
	if err := nc.Flush(); err != nil {
		stop()
		return nil, fmt.Errorf("subscribe: %w", err)
	}
	return stop, nil
}

// waitConnected waits until conn is connected, at most d.
func waitConnected(ctx context.Context, conn *bus.Conn, d time.Duration) error {
	deadline := time.Now().Add(d)
	for !conn.Connected() {
		if time.Now().After(deadline) {
			return fmt.Errorf("no answer within %s", d)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return nil
}

// watchPrinter prints received messages.
type watchPrinter struct {
	out  io.Writer
	json bool
}

// print prints one message. Whatever a message holds, no control character
// reaches the terminal (escapeControl): anyone who can publish under the
// stream's subjects could otherwise move the cursor, clear the screen or
// rewrite earlier lines.
func (p *watchPrinter) print(m watched) {
	if p.json {
		fmt.Fprintf(p.out, "%s\n", escapeControl(strings.TrimSpace(string(m.data))))
		return
	}
	if !m.ok {
		fmt.Fprintf(p.out, "%-23s  %s %s\n", time.Now().UTC().Format("2006-01-02 15:04:05.000"),
			escapeControl(m.subject), escapeControl(string(m.data)))
		return
	}
	d := m.doc
	var b strings.Builder
	at := d.At.UTC().Format("2006-01-02 15:04:05.000")
	if strings.HasPrefix(m.subject, events.NotifierPrefix+".") {
		fmt.Fprintf(&b, "%-23s  %-20s %-13s id=%d notification=%d node=%d", at, d.Channel,
			"email:"+d.Status, d.ID, d.NotificationID, d.Node)
	} else {
		fmt.Fprintf(&b, "%-23s  %-20s %-13s id=%d origin=%d attempt=%d node=%d", at, d.Channel, d.Event,
			d.ID, d.OriginID, d.Attempt, d.Node)
		if d.Priority != 0 {
			fmt.Fprintf(&b, " priority=%d", d.Priority)
		}
	}
	if d.ErrorClass != "" {
		fmt.Fprintf(&b, " error_class=%s", d.ErrorClass)
	}
	if d.Error != nil {
		fmt.Fprintf(&b, " error=%s", strconv.Quote(shorten(*d.Error, 200)))
	}
	if d.Payload != nil {
		fmt.Fprintf(&b, " payload=%s", strconv.Quote(shorten(*d.Payload, 120)))
	} else if d.PayloadOmitted {
		b.WriteString(" payload=(omitted)")
	}
	fmt.Fprintln(p.out, escapeControl(b.String()))
}

// escapeControl writes control characters (C0, DEL, C1), and bytes that are
// not UTF-8, as \xNN or \u00NN escapes; everything else is kept.
func escapeControl(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, n := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, "\\x%02x", s[0])
		case r < 0x20 || r == 0x7f:
			fmt.Fprintf(&b, "\\x%02x", r)
		case r >= 0x80 && r < 0xa0:
			fmt.Fprintf(&b, "\\u%04x", r)
		default:
			b.WriteString(s[:n])
		}
		s = s[n:]
	}
	return b.String()
}

func shorten(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "…"
}

// parseSince reads --since: an RFC 3339 time or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, errors.New("a negative duration")
		}
		return now.Add(-d), nil
	}
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05", "2006-01-02 15:04:05", "2006-01-02"} {
		if t, err := time.ParseInLocation(layout, s, time.Local); err == nil {
			return t, nil
		}
	}
	return time.Time{}, errors.New("expected an RFC 3339 time (2026-05-04T10:00:00Z) or a duration (10m)")
}
