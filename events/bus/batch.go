package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay/events"
)

// Msg is one message of a batch.
type Msg struct {
	Subject string
	Data    []byte
	// ID is the Nats-Msg-Id: JetStream drops a second message with the same
	// id within the stream's duplicate window.
	ID string
	// Header holds more headers (the CloudEvents attributes), their keys
	// kept as they are.
	Header []events.Header
}

// header is m's headers as NATS sends them: Header's, and Nats-Msg-Id on
// core NATS (JetStream's publish options add it there).
func (m Msg) header(core bool) nats.Header {
	h := make(nats.Header, len(m.Header)+1)
	for _, kv := range m.Header {
		h[kv.Key] = []string{kv.Value}
	}
	if core {
		h.Set(jetstream.MsgIDHeader, m.ID)
	}
	return h
}

// BatchResult tells how a batch went.
type BatchResult struct {
	// Acked is how many messages from the start of the batch are known to be
	// stored (JetStream) or flushed to the server (core NATS).
	Acked int
	// Duplicates is how many of those the stream had already (a replay).
	Duplicates int
	// Sent is how many messages were handed to the server. Those past Acked
	// may be stored all the same (their acknowledgements were lost).
	Sent int
	// LastSeq is the stream sequence of the last acknowledged message (0
	// when none was, or on core NATS).
	LastSeq uint64
}

// PublishBatch publishes msgs in order. With stream set it publishes to
// JetStream, expecting that stream, and waits for every acknowledgement;
// with stream empty it publishes on core NATS and flushes. The result counts
// the messages from the start of the batch that made it; err tells why the
// rest did not.
func (c *Conn) PublishBatch(ctx context.Context, stream string, msgs []Msg) (BatchResult, error) {
	var res BatchResult
	if len(msgs) == 0 {
		return res, nil
	}
	if !c.nc.IsConnected() {
		return res, ErrNotConnected
	}
	if stream == "" {
		for _, m := range msgs {
			msg := &nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.header(true)}
			if err := c.nc.PublishMsg(msg); err != nil {
				return res, c.wrap(err, m.Subject)
			}
		}
		fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := c.nc.FlushWithContext(fctx); err != nil {
			return res, fmt.Errorf("bus: flush: %w", c.wrap(err, ""))
		}
		res.Acked = len(msgs)
		return res, nil
	}
	futures := make([]jetstream.PubAckFuture, 0, len(msgs))
	var sendErr error
	for _, m := range msgs {
		f, err := c.js.PublishMsgAsync(&nats.Msg{Subject: m.Subject, Data: m.Data, Header: m.header(false)},
			jetstream.WithMsgID(m.ID), jetstream.WithExpectStream(stream))
		if err != nil {
			sendErr = c.wrap(err, m.Subject)
			break
		}
		futures = append(futures, f)
	}
	res.Sent = len(futures)
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			res.Acked++
			if ack.Duplicate {
				res.Duplicates++
			}
			res.LastSeq = max(res.LastSeq, ack.Sequence)
		case err := <-f.Err():
			return res, fmt.Errorf("bus: publish %s (message %d of %d): %w", msgs[i].Subject, i+1, len(msgs), c.wrap(err, ""))
		case <-ctx.Done():
			return res, ctx.Err()
		}
	}
	return res, sendErr
}
