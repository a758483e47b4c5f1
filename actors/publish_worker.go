package actors

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/events/store"
)

// pubWorker is the publisher's state that rounds use. Only one round runs at
// a time (mu), and the actor hands it to each round's goroutine.
type pubWorker struct {
	d  *deps
	mu sync.Mutex

	closed    bool
	conn      *pgx.Conn
	leased    bool
	node      int
	sources   []*pubSource
	backlogAt time.Time
	settings  store.EventSettings
	pubStream // what the stream set-up (publish_stream.go) found
}

func newPubWorker(d *deps) *pubWorker { return &pubWorker{d: d} }

// close ends the worker's session (and with it the lease), after any round.
func (w *pubWorker) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	w.dropConn()
}

func (w *pubWorker) dropConn() {
	if w.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_ = w.conn.Close(ctx)
		cancel()
	}
	// The sources stay: open reads their cursors again and keeps what they
	// know of batches sent without acknowledgement (NATS knows nothing of
	// the database session).
	w.conn, w.leased = nil, false
}

// round publishes one batch per source. Database errors drop the session
// (the next round opens a new one); NATS errors leave the cursor where the
// acknowledgements stopped.
func (w *pubWorker) round(ctx context.Context) (r roundResult) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return r
	}
	qctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	r = w.publish(qctx)
	if r.err != nil && store.IsConnError(r.err) || errors.Is(r.err, errSession) {
		w.dropConn()
	}
	if ctx.Err() != nil && r.err != nil {
		r.err = nil // stopping: not a failure
	}
	return r
}

// errSession marks a database error after which the session is reopened.
var errSession = errors.New("publisher session")

func (w *pubWorker) publish(ctx context.Context) (r roundResult) {
	if err := w.open(ctx); err != nil {
		r.err = err
		return r
	}
	if !w.leased {
		ok, err := store.TryPublishLease(ctx, w.conn, w.node)
		if err != nil {
			r.err = fmt.Errorf("%w: %w", errSession, err)
			return r
		}
		if ok {
			// The lease won (back): another Processor of the node may have
			// published meanwhile and stopped with a batch unacknowledged.
			for _, src := range w.sources {
				src.startChecked = false
			}
		}
		w.leased = ok
	}
	if !w.leased {
		r.state = stateStandby
		return r
	}
	r.state = statePublishing
	r.err = w.step(ctx, &r)
	// The backlog is measured whatever happened with NATS (that is when it
	// matters), unless the session broke. A round without NATS touches the
	// database only here: a broken session found here is the round's error,
	// so that the next round opens another.
	if r.err == nil || !(errors.Is(r.err, errSession) || store.IsConnError(r.err)) {
		if berr := w.measureBacklog(ctx, &r, r.err == nil && !r.more); berr != nil &&
			(r.err == nil || errors.Is(r.err, bus.ErrNotConnected)) {
			r.err = berr
		}
	}
	return r
}

// step publishes one batch per source.
func (w *pubWorker) step(ctx context.Context, r *roundResult) error {
	bc := w.d.bus
	if !bc.Connected() {
		// A failed round like any other: counted, retried with backoff.
		r.state = stateNoNATS
		return fmt.Errorf("publisher: %w", bus.ErrNotConnected)
	}
	// The generation is read before the set-up: a (re)connection that is
	// reported meanwhile sets it up again.
	// On core NATS, JetStream is looked for again now and then: a server
	// that gains it (or answered late) gets the stream.
	if gen := bc.Generation(); !w.setUp || gen != w.streamGen ||
		(w.stream == "" && time.Since(w.setUpAt) > coreRecheck) {
		if err := w.setUpStream(ctx); err != nil {
			return err
		}
		w.setUp, w.streamGen, w.setUpAt = true, gen, time.Now()
	}
	r.stream = w.stream
	if r.stream == "" {
		r.stream = "(core NATS)"
	}
	horizon, err := store.PublishHorizon(ctx, w.conn)
	if err != nil {
		return err
	}
	// Read each round: an admin's change applies from the next batch on,
	// whichever Processor holds the lease.
	if w.settings, err = store.PublishSettings(ctx, w.conn); err != nil {
		return fmt.Errorf("%w: %w", errSession, err)
	}
	r.published, r.oversize = map[string]int{}, map[string]int{}
	for _, src := range w.sources {
		if w.stream != "" && !src.floorSet {
			src.floor, src.floorSet = w.setUpSeq, true
		}
		more, err := w.publishSource(ctx, src, horizon, r)
		if err != nil {
			if !errors.Is(err, bus.ErrNotConnected) && !errors.Is(err, errSession) {
				w.setUp = false // set the stream up again: it may be gone
			}
			return err
		}
		r.more = r.more || more
	}
	return nil
}

// open opens the publisher's session and reads its node and cursors.
func (w *pubWorker) open(ctx context.Context) error {
	if w.conn != nil {
		return nil
	}
	cfg := w.d.store.Background().Config().ConnConfig.Copy()
	cfg.RuntimeParams["application_name"] = "pgrelay-publisher"
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("publisher: connect to the database: %w", err)
	}
	w.conn = conn
	fail := func(err error) error {
		w.dropConn()
		return fmt.Errorf("publisher: %w", err)
	}
	if w.node, err = store.ThisNode(ctx, conn); err != nil {
		return fail(err)
	}
	names := []string{events.SourceLog}
	notifier, err := store.NotifierEventsExist(ctx, conn)
	if err != nil {
		return fail(err)
	}
	if notifier {
		names = append(names, events.SourceNotifier)
	}
	old := map[string]*pubSource{}
	for _, src := range w.sources {
		old[src.name] = src
	}
	sources := make([]*pubSource, 0, len(names))
	for _, name := range names {
		cur, err := store.OpenCursor(ctx, conn, w.node, name)
		if err != nil {
			return fail(err)
		}
		src := &pubSource{name: name, cursor: cur}
		if o := old[name]; o != nil {
			src.unackedAt, src.stored, src.startChecked = o.unackedAt, o.stored, o.startChecked
			src.floor, src.floorSet = o.floor, o.floorSet
		}
		sources = append(sources, src)
	}
	w.sources = sources
	return nil
}

// backlogEvery is how often the backlog gauge is refreshed: counting is cheap
// (an index range, capped) but not free.
const backlogEvery = time.Second

// measureBacklog refreshes the backlog of every source, at most every
// backlogEvery unless force. The notifier's source is reported where the
// notifier is used: an email channel exists, or its events wait.
func (w *pubWorker) measureBacklog(ctx context.Context, r *roundResult, force bool) error {
	if !force && time.Since(w.backlogAt) < backlogEvery {
		return nil
	}
	r.backlog, r.lag = map[string]int64{}, map[string]time.Duration{}
	for _, src := range w.sources {
		n, err := store.Backlog(ctx, w.conn, w.node, src.name, src.cursor)
		if err != nil {
			return fmt.Errorf("%w: %w", errSession, err)
		}
		if src.name == events.SourceNotifier && n == 0 {
			used, err := store.EmailChannelsExist(ctx, w.conn)
			if err != nil {
				return fmt.Errorf("%w: %w", errSession, err)
			}
			if !used {
				continue
			}
		}
		r.backlog[src.name] = n
		oldest, err := store.OldestUnpublished(ctx, w.conn, w.node, src.name, src.cursor)
		if err != nil {
			return fmt.Errorf("%w: %w", errSession, err)
		}
		r.lag[src.name] = 0
		if oldest != nil {
			r.lag[src.name] = max(time.Since(*oldest), 0)
		}
	}
	w.backlogAt = time.Now()
	return nil
}
