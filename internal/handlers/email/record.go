package email

import (
	"context"
	"sync"

	"github.com/pgrelay/pgrelay/events/store"
)

// maxRecord bounds the notifications one statement records sent.
const maxRecord = 500

// sentRecorder records accepted messages as sent, many in one statement and
// one transaction: while one statement runs, the messages accepted meanwhile
// (on every session) wait for the next, which takes them all. A message is
// in doubt until its statement commits (pgrelay_notifier.send_in_doubt):
// recording at once, rather than after a whole batch of sends, keeps that
// window as short as one commit.
type sentRecorder struct {
	st      *store.Store
	mu      sync.Mutex
	pending []*sentReq
	running bool
}

type sentReq struct {
	id   int64
	done chan error
}

// record records notification id sent; it returns once that committed, or
// failed, or ctx ended (the statement then still runs).
func (r *sentRecorder) record(ctx context.Context, id int64) error {
	q := &sentReq{id: id, done: make(chan error, 1)}
	r.mu.Lock()
	r.pending = append(r.pending, q)
	if !r.running {
		r.running = true
		go r.run()
	}
	r.mu.Unlock()
	select {
	case err := <-q.done:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run writes what is pending, statement after statement, until nothing is.
func (r *sentRecorder) run() {
	for {
		r.mu.Lock()
		batch := r.pending
		if len(batch) > maxRecord {
			batch = batch[:maxRecord:maxRecord]
			r.pending = r.pending[maxRecord:]
		} else {
			r.pending = nil
		}
		if len(batch) == 0 {
			r.running = false
			r.mu.Unlock()
			return
		}
		r.mu.Unlock()
		ids := make([]int64, len(batch))
		for i, q := range batch {
			ids[i] = q.id
		}
		ctx, cancel := context.WithTimeout(context.Background(), bookkeeping)
		_, err := r.st.SetNotificationsSent(ctx, ids)
		cancel()
		for _, q := range batch {
			q.done <- err
		}
	}
}
