// Package pgrelaytest helps test a program that uses pgrelay, in the
// program's own tests and against its own test database (one with
// pgrelay's schema: `pgrelay migrate`, or migrations.Up):
//
//   - RequireNotified asserts that a transaction enqueued an event on a
//     channel, with a given payload or a given value once decoded;
//   - Work runs a channel's ready events through the handlers a program
//     registered on its embedded Processor, synchronously, through the
//     real completion: pgrelay.log, the statuses and the retries are those
//     of production, and each outcome comes back.
//
// RequireNotified reads pgrelay.queue and pgrelay.channels: the login of
// the transaction it is given needs pgrelay_viewer (or pgrelay_admin, or
// to be the superuser most test databases use), besides pgrelay_producer
// to enqueue. Work connects with the Processor's Config.DatabaseURL, whose
// login needs pgrelay_processor as `pgrelay run`'s does.
package pgrelaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/pgrelay/pgrelay"
	"github.com/pgrelay/pgrelay/processor"
)

// Match narrows RequireNotified to the events it matches.
type Match struct {
	what  string
	match func(payload string) bool
}

// Payload matches the events whose payload is exactly payload.
func Payload(payload string) Match {
	return Match{what: fmt.Sprintf("payload %q", payload), match: func(p string) bool { return p == payload }}
}

// JSON matches the events whose payload decodes (encoding/json) into a T
// equal to want (reflect.DeepEqual): what pgrelay.NotifyJSON enqueued for
// want.
func JSON[T any](want T) Match {
	return Match{what: fmt.Sprintf("a JSON %T equal to %+v", want, want), match: func(p string) bool {
		var got T
		return json.Unmarshal([]byte(p), &got) == nil && reflect.DeepEqual(got, want)
	}}
}

// RequireNotified asserts that q sees an event on channel that every match
// matches (with none, any event), and returns those events, oldest first;
// otherwise it fails t at once, listing what the channel holds. Give it
// the transaction under test before it commits (it sees what that
// transaction enqueued), or a pool once committed: it reads the events
// still in the queue, pending or running, not those a Processor already
// ended.
func RequireNotified(t testing.TB, q pgrelay.Querier, channel string, match ...Match) []pgrelay.Event {
	t.Helper()
	all, err := queued(t.Context(), q, channel)
	if err != nil {
		t.Fatalf("pgrelaytest: RequireNotified on channel %q: %v", channel, err)
		return nil
	}
	var found []pgrelay.Event
	for _, ev := range all {
		if matchesAll(ev.Payload, match) {
			found = append(found, ev)
		}
	}
	if len(found) > 0 {
		return found
	}
	var want []string
	for _, m := range match {
		want = append(want, m.what)
	}
	if len(want) == 0 {
		want = append(want, "any payload")
	}
	t.Fatalf("pgrelaytest: no event on channel %q with %s; the channel holds %s",
		channel, strings.Join(want, " and "), describe(all))
	return nil
}

func matchesAll(payload string, match []Match) bool {
	for _, m := range match {
		if !m.match(payload) {
			return false
		}
	}
	return true
}

// describe lists events' payloads for a failure message (the first 10).
func describe(evs []pgrelay.Event) string {
	if len(evs) == 0 {
		return "no event"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d event(s):", len(evs))
	for i, ev := range evs {
		if i == 10 {
			b.WriteString(" ...")
			break
		}
		fmt.Fprintf(&b, " %d %q;", ev.OriginID, ev.Payload)
	}
	return strings.TrimSuffix(b.String(), ";")
}

// queued reads the events of channel in pgrelay.queue, as q sees them.
func queued(ctx context.Context, q pgrelay.Querier, channel string) ([]pgrelay.Event, error) {
	var doc []byte
	err := q.QueryRow(ctx, `SELECT COALESCE(pg_catalog.json_agg(pg_catalog.json_build_object(
			'id', e.id, 'origin_id', e.origin_id, 'payload', e.payload, 'attempt', e.attempt,
			'enqueued_at', e.enqueued_at, 'max_attempts', c.max_attempts) ORDER BY e.id), '[]'::pg_catalog.json)
		FROM pgrelay.queue e LEFT JOIN pgrelay.channels c ON c.channel = e.channel
		WHERE e.channel = $1::pg_catalog.text`, channel).Scan(&doc)
	if err != nil {
		return nil, fmt.Errorf("read pgrelay.queue (the login needs pgrelay_viewer): %w", err)
	}
	var rows []struct {
		ID          int64     `json:"id"`
		OriginID    int64     `json:"origin_id"`
		Payload     string    `json:"payload"`
		Attempt     int       `json:"attempt"`
		EnqueuedAt  time.Time `json:"enqueued_at"`
		MaxAttempts int       `json:"max_attempts"`
	}
	if err := json.Unmarshal(doc, &rows); err != nil {
		return nil, fmt.Errorf("decode the queue's rows: %w", err)
	}
	evs := make([]pgrelay.Event, len(rows))
	for i, r := range rows {
		evs[i] = pgrelay.Event{ID: r.ID, OriginID: r.OriginID, Channel: channel, Payload: r.Payload,
			Attempt: r.Attempt, MaxAttempts: r.MaxAttempts, EnqueuedAt: r.EnqueuedAt}
	}
	return evs, nil
}

// Work runs the ready events of channel through the handlers registered on
// p, which is not started, in the calling goroutine, and returns each
// outcome in the order the events ran: Processor.Work. Each event is
// claimed, run and completed as in production; each runs once, and a retry
// it asks for is a new pending event that a later Work runs once it is due
// (register the channel with p_retry_delay := '0' to run it at once).
func Work(ctx context.Context, p *processor.Processor, channel string) ([]processor.Outcome, error) {
	return p.Work(ctx, channel)
}
