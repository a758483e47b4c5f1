package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// storedFetch is how many messages StoredIDs asks for at a time.
const storedFetch = 1000

// StoredIDs returns the Nats-Msg-Id of every message of stream on subjects
// filter stored after sequence after, up to the stream's last message when
// it is called (later messages are not waited for), that keep accepts (nil:
// all; the others are read but not held). It reads headers only, through a
// consumer of its own that it deletes, so the user needs permission to create
// and delete consumers on the stream and to fetch from them. It returns an
// error rather than a partial set: when ctx ends first, or when the server
// stops delivering before every message that matched was read.
func (c *Conn) StoredIDs(ctx context.Context, stream, filter string, after uint64, keep func(id string) bool) (map[string]bool, error) {
	return c.storedIDs(ctx, stream, filter, after, time.Time{}, keep)
}

// StoredIDsSince is StoredIDs from the messages stored at or after since
// (by the server's clock) on.
func (c *Conn) StoredIDsSince(ctx context.Context, stream, filter string, since time.Time, keep func(id string) bool) (map[string]bool, error) {
	return c.storedIDs(ctx, stream, filter, 0, since, keep)
}

// storedFetchWait is the longest wait for one fetch of StoredIDs.
const storedFetchWait = 5 * time.Second

func (c *Conn) storedIDs(ctx context.Context, stream, filter string, after uint64, since time.Time,
	keep func(string) bool) (map[string]bool, error) {
	ids := map[string]bool{}
	if !c.nc.IsConnected() {
		return nil, ErrNotConnected
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("bus: look up stream %s: %w", stream, c.wrap(err, ""))
	}
	last := s.CachedInfo().State.LastSeq
	if last <= after {
		return ids, nil
	}
	cc := jetstream.ConsumerConfig{
		AckPolicy:     jetstream.AckNonePolicy,
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   after + 1,
		FilterSubject: filter,
		HeadersOnly:   true,
		MemoryStorage: true,
		// Removed by the server should the delete below not get through.
		InactiveThreshold: time.Minute,
	}
	from := fmt.Sprintf("sequence %d", after+1)
	if !since.IsZero() {
		cc.DeliverPolicy, cc.OptStartSeq, cc.OptStartTime = jetstream.DeliverByStartTimePolicy, 0, &since
		from = since.Format(time.RFC3339Nano)
	}
	cons, err := s.CreateConsumer(ctx, cc)
	if err != nil {
		return nil, fmt.Errorf("bus: read stream %s (%s) from %s: create a consumer: %w", stream, filter, from, c.wrap(err, ""))
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, cons.CachedInfo().Name)
	}()
	fail := func(read int, err error) error {
		return fmt.Errorf("bus: read stream %s (%s) from %s up to sequence %d (%d messages read): %w",
			stream, filter, from, last, read, err)
	}
	// What matched when the consumer was made, asked for exactly so that a
	// fetch ends when it arrived rather than at its max wait.
	remaining := cons.CachedInfo().NumPending
	read := 0
	for remaining > 0 {
		if err := ctx.Err(); err != nil {
			return nil, fail(read, err)
		}
		fctx, cancel := context.WithTimeout(ctx, storedFetchWait)
		n, done, err := c.fetchIDs(fctx, cons, int(min(remaining, storedFetch)), last, ids, keep)
		cancel()
		read += n
		switch {
		case err != nil:
			return nil, fail(read, err)
		case done:
			return ids, nil
		case n == 0:
			// Neither the messages that matched nor an error: what was read
			// is not all there is.
			return nil, fail(read, fmt.Errorf("%d messages not delivered within %s", remaining, storedFetchWait))
		}
		remaining -= uint64(min(uint64(n), remaining))
	}
	return ids, nil
}

// fetchIDs fetches up to n messages of cons (until ctx ends) and adds the
// ids that keep accepts to ids. done reports the stream's message last (or
// a later one) reached.
func (c *Conn) fetchIDs(ctx context.Context, cons jetstream.Consumer, n int, last uint64, ids map[string]bool,
	keep func(string) bool) (got int, done bool, err error) {
	batch, err := cons.Fetch(n, jetstream.FetchContext(ctx))
	if err != nil {
		return 0, false, c.wrap(err, "")
	}
	for m := range batch.Messages() {
		got++
		md, err := m.Metadata()
		if err != nil {
			return got, false, err
		}
		if md.Sequence.Stream > last {
			done = true
			continue
		}
		if id := m.Headers().Get(jetstream.MsgIDHeader); id != "" && (keep == nil || keep(id)) {
			ids[id] = true
		}
		if md.Sequence.Stream == last || md.NumPending == 0 {
			done = true
		}
	}
	if err := batch.Error(); err != nil && !done {
		// A fetch that timed out after some messages is followed by another;
		// one that brought none is a failure.
		timeout := errors.Is(err, nats.ErrTimeout) || errors.Is(err, context.DeadlineExceeded)
		if !timeout || got == 0 {
			return got, false, c.wrap(err, "")
		}
	}
	return got, done, nil
}
