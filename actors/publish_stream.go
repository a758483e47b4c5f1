package actors

import (
	"context"
	"fmt"
	"time"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
)

// pubStream is what the worker's stream set-up found: where it publishes,
// and what it read of the stream then.
type pubStream struct {
	setUp     bool      // the stream (or core NATS) was chosen ...
	streamGen uint64    // ... in this bus generation ...
	setUpAt   time.Time // ... at this time
	stream    string    // "" while publishing on core NATS
	// dupWindow is the stream's duplicate window, read at each set-up.
	dupWindow time.Duration
	// streamCreated is when the stream was created, read at each set-up: a
	// stream deleted and created again has another, and nothing read from
	// the old one holds for it.
	streamCreated time.Time
	// setUpSeq is the stream's last sequence at the latest set-up: the floor
	// of a source that has none yet.
	setUpSeq uint64
}

// setUpStream decides between JetStream and core NATS and, with JetStream,
// creates or reconciles the events stream.
func (w *pubWorker) setUpStream(ctx context.Context) error {
	bc, n := w.d.bus, w.d.cfg.NATS
	js, err := bc.JetStreamEnabled(ctx)
	if err != nil {
		return err
	}
	if !js {
		if w.stream != "" || !w.setUp {
			w.d.log.Warn("the NATS server has no JetStream: publishing events on core NATS, at most once " +
				"(a subscriber that is away misses them); see docs/events.md")
		}
		w.stream = ""
		return nil
	}
	did, err := bc.EnsureStream(ctx, bus.StreamConfig{Name: n.Stream, MaxAge: n.MaxAge, Retention: n.Retention,
		MaxBytes: n.MaxBytes, Replicas: n.Replicas})
	if err != nil {
		return err
	}
	if did != "ok" {
		w.d.log.Info("events stream "+did, "stream", n.Stream, "subjects", events.StreamSubjects)
	}
	st, err := bc.StreamState(ctx, n.Stream)
	if err != nil {
		return err
	}
	w.dupWindow = st.Duplicates
	fresh := did == "created" || (!w.streamCreated.IsZero() && !st.Created.Equal(w.streamCreated))
	w.streamCreated, w.setUpSeq = st.Created, st.LastSeq
	for _, src := range w.sources {
		switch {
		case fresh || src.floorSet && st.LastSeq < src.floor:
			// A new stream (the old one was deleted): all of it is after.
			src.forgetStream()
			src.floorSet = true
		case !src.floorSet:
			src.floor, src.floorSet = st.LastSeq, true
		}
	}
	w.stream = n.Stream
	return nil
}

// checkStream makes sure the ids src holds as stored were read from the
// stream as it is now (not deleted and created again since the set-up).
func (w *pubWorker) checkStream(ctx context.Context, src *pubSource) error {
	st, err := w.d.bus.StreamState(ctx, w.stream)
	if err != nil {
		return fmt.Errorf("publisher: check stream %s before passing over %s events found in it: %w", w.stream, src.name, err)
	}
	if !st.Created.Equal(w.streamCreated) || st.LastSeq < src.floor {
		w.d.log.Warn("events stream created again: the events found in the old one are published again",
			"stream", w.stream, "source", src.name)
		w.setUp = false
		for _, s := range w.sources {
			s.forgetStream()
		}
	}
	return nil
}

// forgetStream drops what src knows of a stream that is gone: a new stream
// of the name holds none of the old one's messages.
func (src *pubSource) forgetStream() {
	src.floor, src.stored = 0, nil
}

// coreRecheck is how often a publisher on core NATS asks for JetStream again.
const coreRecheck = 30 * time.Second
