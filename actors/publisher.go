package actors

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/events"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the publisher.
type (
	// publishTick: look for events to publish (ticker, or more are waiting).
	publishTick struct{}
	// publishDone: a publishing round ended.
	publishDone struct{ r roundResult }
)

// publisher follows this node's rows of pgrelay.log (and of the notifier's
// status_events) and publishes each as JSON on NATS (docs/events.md). Its
// position is a cursor row in pgrelay.publish_cursors, moved only once NATS
// acknowledged everything up to it, so a restart or an outage loses nothing:
// what was not acknowledged is published again, and JetStream drops the
// copies by Nats-Msg-Id within its duplicate window (past half of it, the
// publisher looks in the stream for them first: findStored). Dispatch never waits on it; while NATS is away the
// events wait in the log and the backlog shows in a gauge and `pgrelay stats`.
//
// A round (lease, horizon, batch, publish, wait for acks, move the cursor)
// runs in a goroutine on the publisher's own connection, one at a time;
// rounds follow each other at once while a batch comes back full.
type publisher struct {
	d         *deps
	w         *pubWorker
	busy      bool
	failures  int
	notBefore time.Time
	stopTick  func()
	cancel    context.CancelFunc
	lastErr   string
	lastLog   time.Time
	state     string
}

func publisherProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &publisher{d: d} })
}

func (p *publisher) Receive(ctx actor.Context) {
	p.d.hook("publisher", ctx.Message())
	switch m := ctx.Message().(type) {
	case *actor.Started:
		p.w = newPubWorker(p.d)
		p.stopTick = ticker(p.d, ctx.Self(), p.d.cfg.NATS.PublishInterval, func() any { return &publishTick{} })
		ctx.Send(ctx.Self(), &publishTick{})
	case *actor.Stopping, *actor.Restarting:
		p.stopTick()
		if p.cancel != nil {
			p.cancel()
		}
		// The connection is closed once a running round has ended; Stop
		// waits for that before it closes the pools.
		w := p.w
		p.d.work.Add(1)
		go func() {
			defer p.d.work.Done()
			w.close()
		}()
	case *publishTick:
		if p.busy || time.Now().Before(p.notBefore) {
			return
		}
		p.busy = true
		rctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		self, w, d := ctx.Self(), p.w, p.d
		d.work.Add(1)
		go func() {
			defer d.work.Done()
			defer cancel()
			d.send(self, &publishDone{r: w.round(rctx)})
		}()
	case *publishDone:
		p.busy = false
		p.record(m.r)
		if m.r.err != nil {
			p.failures++
			p.notBefore = time.Now().Add(backoff(p.failures))
			return
		}
		p.failures = 0
		if m.r.more {
			ctx.Send(ctx.Self(), &publishTick{})
		}
	case *actor.Stopped:
	default:
		p.d.log.Warn("publisher: unexpected message", "type", typeName(ctx.Message()))
	}
}

// record counts a round's outcome and logs what changed. A failure that
// repeats is logged once a minute, not at every retry.
func (p *publisher) record(r roundResult) {
	m := p.d.metrics.Events
	for src, n := range r.published {
		m.Published.WithLabelValues(src).Add(float64(n))
	}
	for src, n := range r.oversize {
		m.Oversize.WithLabelValues(src).Add(float64(n))
	}
	m.Duplicates.Add(float64(r.duplicates))
	for src, n := range r.backlog {
		m.Backlog.WithLabelValues(src).Set(float64(n))
	}
	for src, d := range r.lag {
		m.Lag.WithLabelValues(src).Set(d.Seconds())
	}
	if p.d.bus.Connected() {
		m.Connected.Set(1)
	} else {
		m.Connected.Set(0)
	}
	if r.err != nil {
		m.PublishErrors.Inc()
		msg := r.err.Error()
		if msg != p.lastErr || time.Since(p.lastLog) > time.Minute {
			p.d.log.Error("publishing events to NATS failed; retrying (dispatch goes on, the events wait in the log)",
				"err", r.err)
			p.lastErr, p.lastLog = msg, time.Now()
		}
		return
	}
	if p.lastErr != "" {
		p.d.log.Info("publishing events to NATS again")
		p.lastErr = ""
	}
	if r.state != p.state {
		p.d.log.Info("event publisher: "+r.state, "stream", r.stream)
		p.state = r.state
	}
}

// roundResult is what one round did.
type roundResult struct {
	state      string
	stream     string
	published  map[string]int
	oversize   map[string]int
	duplicates int
	backlog    map[string]int64 // nil when not measured this round
	// lag: per source, the age of the oldest row not yet published (0 when
	// none); measured with the backlog.
	lag  map[string]time.Duration
	more bool
	err  error
}

// Publisher states, as logged.
const (
	statePublishing = "publishing"
	stateStandby    = "standby: another Processor of this node holds the publisher lease"
	stateNoNATS     = "waiting for NATS"
)

// backlogEvery is how often the backlog gauge is refreshed: counting is cheap
// (an index range, capped) but not free.
const backlogEvery = time.Second

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
	setUp     bool      // the stream (or core NATS) was chosen ...
	streamGen uint64    // ... in this bus generation ...
	setUpAt   time.Time // ... at this time
	stream    string    // "" while publishing on core NATS
	backlogAt time.Time
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

// forgetStream drops what src knows of a stream that is gone: a new stream
// of the name holds none of the old one's messages.
func (src *pubSource) forgetStream() {
	src.floor, src.stored = 0, nil
}

// filter is the subjects of src's messages.
func (src *pubSource) filter() string {
	if src.name == events.SourceNotifier {
		return events.NotifierPrefix + ".>"
	}
	return events.EventsPrefix + ".>"
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
	// matters), unless the session broke.
	if r.err == nil || !(errors.Is(r.err, errSession) || store.IsConnError(r.err)) {
		if berr := w.measureBacklog(ctx, &r, r.err == nil && !r.more); r.err == nil {
			r.err = berr
		}
	}
	return r
}

// step publishes one batch per source.
func (w *pubWorker) step(ctx context.Context, r *roundResult) error {
	bc := w.d.bus
	if !bc.Connected() {
		r.state = stateNoNATS
		return nil
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
		MaxBytes: n.MaxBytes})
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

// coreRecheck is how often a publisher on core NATS asks for JetStream again.
const coreRecheck = 30 * time.Second

// headroom is what a message's headers (Nats-Msg-Id, Nats-Expected-Stream)
// take of the server's max payload, generously.
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
	add := func(id int64, subject string, data []byte, shrunk, ok bool) {
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
		msgs = append(msgs, bus.Msg{Subject: subject, Data: data, ID: msgID})
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
			doc.Error, doc.ErrorClass = events.PublishedError(row.Error, row.PublishErrors)
			doc.PayloadOmitted = row.PublishPayload && row.Payload == nil
			data, shrunk, ok := events.Fit(doc, maxPayload-headroom)
			add(row.ID, doc.Subject(), data, shrunk, ok)
			last = row.ID
		}
		n = len(rows)
	case events.SourceNotifier:
		rows, err := store.NotifierBatch(ctx, w.conn, w.node, src.cursor, horizon, limit)
		if err != nil {
			return false, fmt.Errorf("%w: %w", errSession, err)
		}
		for _, doc := range rows {
			data, shrunk, ok := events.FitNotifier(doc, maxPayload-headroom)
			add(doc.ID, doc.Subject(), data, shrunk, ok)
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

// findStored reads the stream for the messages of src that are stored
// already although the publisher did not see them acknowledged, when they
// may be older than half the stream's duplicate window (sent again, they
// would be stored twice once the window has passed; within it the server
// drops the copies and nothing is read):
//   - a batch of src went unacknowledged that long ago: the stream is read
//     after src's floor;
//   - at the worker's first batch of src since it won the publish lease
//     (another Processor of the node may have been stopped with a batch
//     unacknowledged) whose first row is that old: the stream is read from
//     that row's time on, less clockSkew.
//
// first is the batch's first row: only this node's ids from it on are kept
// (what the batch and the ones after it may send again). The ids read are
// added to src.stored. The read has its own budget (storedReadBudget); when
// it fails or runs out, a warning is logged and the batch is published all
// the same: a copy stored twice is better than a publisher stuck for good
// (a stream too large to read in time, a NATS user without the permission
// to read it).
func (w *pubWorker) findStored(ctx context.Context, src *pubSource, first int64) {
	if w.stream == "" {
		return
	}
	keep := func(s string) bool {
		id, err := strconv.ParseInt(s, 10, 64)
		return err == nil && id >= first && idNode(id) == w.node
	}
	rctx, cancel := context.WithTimeout(ctx, storedReadBudget)
	defer cancel()
	var stored map[string]bool
	var err error
	var from string
	switch {
	case !src.unackedAt.IsZero() && time.Since(src.unackedAt) > w.dupWindow/2:
		from = "after sequence " + strconv.FormatUint(src.floor, 10)
		stored, err = w.d.bus.StoredIDs(rctx, w.stream, src.filter(), src.floor, keep)
	case !src.startChecked && time.Since(events.IDTime(first)) > w.dupWindow/2:
		since := events.IDTime(first).Add(-clockSkew)
		from = "since " + since.Format(time.RFC3339Nano)
		stored, err = w.d.bus.StoredIDsSince(rctx, w.stream, src.filter(), since, keep)
	default:
		src.startChecked = true
		return
	}
	src.startChecked = true
	if h := w.d.cfg.NATS.testStored; h != nil {
		stored, err = h(stored, err)
	}
	if err != nil {
		w.d.log.Warn("publisher: could not read the events stream for events stored without acknowledgement; "+
			"publishing them anyway (those past the duplicate window may be stored twice)",
			"source", src.name, "stream", w.stream, "from", from, "first_id", first, "err", err)
		return
	}
	if src.stored == nil {
		src.stored = map[int64]bool{}
	}
	for s := range stored {
		id, _ := strconv.ParseInt(s, 10, 64) // keep parsed it
		if _, ok := src.stored[id]; !ok {
			src.stored[id] = false
		}
	}
}

// storedReadBudget is the most time findStored spends reading the stream.
const storedReadBudget = 20 * time.Second

// idNode is the node id of an id (docs/architecture.md#ids: milliseconds,
// then 10 bits of node, then 12 bits of sequence).
func idNode(id int64) int { return int(id>>12) & 0x3ff }

// clockSkew is how far behind PostgreSQL's the NATS server's clock may run
// for the first batch's look into the stream (findStored) to find every copy.
const clockSkew = time.Minute

// measureBacklog refreshes the backlog of every source, at most every
// backlogEvery unless force.
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

// EventMetrics are the collectors of status events on NATS and of the nats
// handler kind.
type EventMetrics struct {
	Published       *prometheus.CounterVec
	PublishErrors   prometheus.Counter
	Backlog         *prometheus.GaugeVec
	Lag             *prometheus.GaugeVec
	Oversize        *prometheus.CounterVec
	Duplicates      prometheus.Counter
	Connected       prometheus.Gauge
	HandlerTooLarge *prometheus.CounterVec
}

func newEventMetrics() *EventMetrics {
	return &EventMetrics{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_published_total",
			Help: "Events published on NATS (acknowledged by JetStream, or flushed on core NATS), by source.",
		}, []string{"source"}),
		PublishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_publish_errors_total",
			Help: "Publishing rounds that failed (NATS or database errors); they are retried.",
		}),
		Backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "events_backlog",
			Help: "Events of this node not yet published on NATS, by source (counted up to 100001).",
		}, []string{"source"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "events_lag_seconds",
			Help: "Age of this node's oldest event not yet published on NATS, by source (0 when none).",
		}, []string{"source"}),
		Oversize: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_oversize_total",
			Help: "Events over the NATS max payload: published without payload (or with the error cut), or passed over when even that does not fit (logged), by source.",
		}, []string{"source"}),
		Duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_duplicates_total",
			Help: "Events published again after an unacknowledged attempt and dropped by JetStream as duplicates, or found stored already after a long outage and not sent again.",
		}),
		Connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "nats_connected", Help: "1 while connected to NATS.",
		}),
		HandlerTooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "nats_handler_too_large_total",
			Help: "Events of nats channels given up because the payload exceeds the server's max payload, by channel.",
		}, []string{"channel"}),
	}
}

func (m *EventMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.Published, m.PublishErrors, m.Backlog, m.Lag, m.Oversize, m.Duplicates,
		m.Connected, m.HandlerTooLarge}
}
