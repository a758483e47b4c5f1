package actors

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/events/store"
)

// pubSource is one source the publisher follows (the log, the notifier's
// status events): its cursor and what it knows of its messages in the stream.
type pubSource struct {
	name   string
	cursor int64
	// floor is a stream sequence below which no message of this source
	// awaits an acknowledgement: the last of its own messages acknowledged
	// before unackedAt was set, or the stream's last message when the
	// source was first set up (floorSet). Only the source's own
	// acknowledgements raise it, and not while unackedAt is set: a copy
	// stored again past the duplicate window must not lift it over the
	// messages stored without acknowledgement.
	floor    uint64
	floorSet bool
	// unackedAt: when a batch was sent whose acknowledgements did not all
	// come (zero when none is outstanding). Its messages may be stored.
	unackedAt time.Time
	// stored: the ids (of this node, from the first row of the batch they
	// were looked for on) read back from the current stream when a batch
	// is sent again past half the duplicate window (the server no longer
	// drops those copies reliably); they are passed over, not sent again.
	// The value tells whether the id was counted as a duplicate already.
	stored map[int64]bool
	// startChecked: the first batch was checked against the stream.
	startChecked bool
}

// noteBatch records the outcome of a batch sent at sentAt to the stream;
// last is the batch's last row.
func (src *pubSource) noteBatch(res bus.BatchResult, perr error, sentAt time.Time, last int64) {
	if src.unackedAt.IsZero() {
		src.floor = max(src.floor, res.LastSeq)
	}
	switch {
	case res.Sent > res.Acked:
		if src.unackedAt.IsZero() {
			src.unackedAt = sentAt
		}
	case perr == nil:
		// Everything acknowledged: nothing of this source awaits an
		// acknowledgement any more.
		src.unackedAt = time.Time{}
		src.floor = max(src.floor, res.LastSeq)
		for id := range src.stored {
			if id <= last {
				delete(src.stored, id)
			}
		}
	}
}

// headroom is what the headers the bus adds to a message (Nats-Msg-Id,
// Nats-Expected-Stream) take of the server's max payload, generously. The
// CloudEvents headers are measured for each message (events.HeadersSize).
const headroom = 512

// publishSource publishes one batch of src and moves its cursor to the last
// acknowledged row. more reports a full batch (there is likely more).
func (w *pubWorker) publishSource(ctx context.Context, src *pubSource, horizon int64, r *roundResult) (more bool, err error) {
	var last int64 // the batch's last row, published or passed over
	var n int
	limit := w.d.cfg.NATS.PublishBatch
	maxPayload := w.d.bus.MaxPayload()
	if maxPayload == 0 {
		return false, bus.ErrNotConnected
	}
	if w.stream != "" && len(src.stored) > 0 {
		if err := w.checkStream(ctx, src); err != nil {
			return false, err
		}
	}
	var ids []int64
	var msgs []bus.Msg
	skipped, counted := 0, 0
	var skipFirst, skipLast int64
	set := w.settings
	source := events.CESource(set.Cluster, w.node)
	add := func(id int64, subject string, hdr []events.Header, data []byte, shrunk, ok bool) {
		if last == 0 { // the first row
			w.findStored(ctx, src, id)
		}
		msgID := strconv.FormatInt(id, 10)
		if c, found := src.stored[id]; found {
			// Stored before, its acknowledgement lost: not sent again.
			// Counted once, however often the batch is tried.
			if !c {
				src.stored[id] = true
				counted++
			}
			if skipped == 0 {
				skipFirst = id
			}
			skipped++
			skipLast = id
			return
		}
		if shrunk {
			r.oversize[src.name]++
		}
		if !ok {
			// Not even the bare event fits: it cannot be published at all.
			// Counted and logged, then passed over (a stuck cursor would
			// stop every event after it).
			w.d.log.Error("event too large for the NATS server's max payload even without payload and error; not published",
				"source", src.name, "id", id, "max_payload", maxPayload)
			return
		}
		ids = append(ids, id)
		msgs = append(msgs, bus.Msg{Subject: subject, Data: data, ID: msgID, Header: hdr})
	}
	switch src.name {
	case events.SourceLog:
		rows, err := store.LogBatch(ctx, w.conn, w.node, src.cursor, horizon, limit)
		if err != nil {
			return false, fmt.Errorf("%w: %w", errSession, err)
		}
		for _, row := range rows {
			var payload *string
			if row.PublishPayload {
				payload = row.Payload
			}
			doc := events.NewPublished(row.LogEvent, payload)
			doc.Schema = set.Schema
			doc.Error, doc.ErrorClass = events.PublishedNote(row.Event, row.Error, row.PublishErrors)
			doc.PayloadOmitted = row.PublishPayload && row.Payload == nil
			hdr := events.CEHeaders(row.ID, source, events.CEType(row.Event), doc.At, row.Channel)
			data, shrunk, ok := events.Fit(doc, maxPayload-headroom-events.HeadersSize(hdr))
			add(row.ID, doc.Subject(), hdr, data, shrunk, ok)
			last = row.ID
		}
		n = len(rows)
	case events.SourceNotifier:
		rows, err := store.NotifierBatch(ctx, w.conn, w.node, src.cursor, horizon, limit)
		if err != nil {
			return false, fmt.Errorf("%w: %w", errSession, err)
		}
		for _, doc := range rows {
			doc.Schema = set.Schema
			hdr := events.CEHeaders(doc.ID, source, events.CENotifierType(doc.Status), doc.At, doc.Channel)
			data, shrunk, ok := events.FitNotifier(doc, maxPayload-headroom-events.HeadersSize(hdr))
			add(doc.ID, doc.Subject(), hdr, data, shrunk, ok)
			last = doc.ID
		}
		n = len(rows)
	}
	if n == 0 {
		return false, nil
	}
	if skipped > 0 {
		w.d.log.Info("events found in the stream already, stored without acknowledgement before; not published again",
			"source", src.name, "count", skipped, "first_id", skipFirst, "last_id", skipLast)
	}
	sentAt := time.Now()
	res, perr := w.d.bus.PublishBatch(ctx, w.stream, msgs)
	if h := w.d.cfg.NATS.testBatch; h != nil {
		res, perr = h(res, perr)
	}
	if h := w.d.cfg.NATS.testSourceBatch; h != nil {
		res, perr = h(src.name, res, perr)
	}
	r.published[src.name] += res.Acked
	r.duplicates += res.Duplicates + counted
	if w.stream != "" {
		src.noteBatch(res, perr, sentAt, last)
	}
	upTo := last
	if res.Acked < len(msgs) {
		// Up to the last acknowledged message; rows passed over before it
		// are behind it too.
		upTo = 0
		if res.Acked > 0 {
			upTo = ids[res.Acked-1]
		}
	}
	if upTo > src.cursor {
		cur, err := store.AdvanceCursor(ctx, w.conn, w.node, src.name, upTo)
		if err != nil {
			return false, fmt.Errorf("%w: %w", errSession, err)
		}
		src.cursor = cur
	}
	if perr != nil {
		return false, perr
	}
	return n == limit, nil
}
