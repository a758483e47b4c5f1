package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/migrations"
)

// The soak: the integrity suite. A randomised mixed workload runs against a
// real `pgrelay run` process under random faults, then the database, the
// SMTP catcher and the NATS streams are checked against invariants. The
// workload and the fault schedule come from one seed; the timing of the
// processes does not, so a seed names a run's recipe, not its interleaving.

// soakConfig configures one soak run.
type soakConfig struct {
	// Duration of the workload under faults (the drain and the checks come
	// after it).
	Duration time.Duration
	// Seed of the workload and of the faults.
	Seed uint64
	// Rate of producer transactions per second (each notifies 1-3 events).
	Rate float64
	// FaultEvery is the mean time between two faults.
	FaultEvery time.Duration
	// DrainTimeout bounds the wait, once the faults and producers stopped,
	// for nothing to be left pending, in flight or unpublished.
	DrainTimeout time.Duration
	// Exe and Env start the Processor: `Exe run ...` with Env added to this
	// process's environment.
	Exe string
	Env []string
	// Logger receives progress (faults, phases).
	Logger *slog.Logger
}

// The soak's channels.
const (
	soakNone  = "soak_none"  // sql, concurrency none
	soakChan  = "soak_chan"  // sql, concurrency channel
	soakPay   = "soak_pay"   // sql, concurrency payload (payloads repeat)
	soakDedup = "soak_dedup" // sql, deduplicate, reads the key's version
	soakExp   = "soak_exp"   // sql, expire_after 1s
	soakMail  = "soak_mail"  // email to the catcher
	soakNATS  = "soak_nats"  // nats, a subject a JetStream stream captures

	soakOutboxSubject = "soak.outbox"
	soakOutboxStream  = "SOAK_OUTBOX"
	soakEventsStream  = "PGRELAY_EVENTS"
	soakMailDomain    = "soak.example"
	soakRejectDomain  = "reject.example" // refused with 550: the notification fails for good
)

// soakSchema is the workload's own schema: the handlers' effects (no unique
// key: a duplicate effect is a second row), the dedup keys' versions, what
// the producers committed (written in the producer's transaction, so it
// holds exactly the committed events), and a table whose deferred
// constraint trigger fails the transaction at COMMIT.
const soakSchema = `
CREATE SCHEMA soak;
CREATE TABLE soak.effects (
  id bigserial PRIMARY KEY,
  channel text NOT NULL,
  payload text NOT NULL,
  version int,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON soak.effects (channel, payload);
CREATE TABLE soak.state (key text PRIMARY KEY, version int NOT NULL);
CREATE TABLE soak.produced (
  id bigint NOT NULL,
  channel text NOT NULL,
  payload text NOT NULL,
  version int,
  notification_id bigint,
  at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX ON soak.produced (id);
CREATE TABLE soak.commit_poison (payload text NOT NULL);

-- A sql handler: records its effect, then fails on the payload's kind:
-- flaky (at random, half the time), poison (always), commit (at COMMIT,
-- through the deferred trigger below).
CREATE FUNCTION soak.effect(p_channel text, p_payload text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  v_kind text := pg_catalog.split_part(p_payload, ':', 2);
BEGIN
  INSERT INTO soak.effects (channel, payload) VALUES (p_channel, p_payload);
  IF v_kind = 'flaky' AND pg_catalog.random() < 0.5 THEN
    RAISE EXCEPTION 'soak: flaky handler failed on %', p_payload;
  ELSIF v_kind = 'poison' THEN
    RAISE EXCEPTION 'soak: poison payload %', p_payload;
  ELSIF v_kind = 'commit' THEN
    INSERT INTO soak.commit_poison (payload) VALUES (p_payload);
  END IF;
END
$$;

CREATE FUNCTION soak.fail_at_commit() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'soak: payload % fails at COMMIT', NEW.payload;
END
$$;
CREATE CONSTRAINT TRIGGER fail_at_commit AFTER INSERT ON soak.commit_poison
  DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION soak.fail_at_commit();

-- The dedup channel's handler: records the version of its key it saw.
CREATE FUNCTION soak.dedup_effect(p_key text) RETURNS void
LANGUAGE sql AS $$
  INSERT INTO soak.effects (channel, payload, version)
  SELECT 'soak_dedup', p_key, s.version FROM soak.state s WHERE s.key = p_key
$$;
`

// soakChannels registers the channels. Retries are quick (100 ms doubled)
// so that poison events reach max_attempts within seconds.
const soakChannels = `
SELECT pgrelay.register('soak_none', 'SELECT soak.effect(''soak_none'', $1)',
  p_max_attempts := 4, p_retry_delay := '100 ms');
SELECT pgrelay.register('soak_chan', 'SELECT soak.effect(''soak_chan'', $1)',
  p_concurrency_mode := 'channel', p_max_attempts := 4, p_retry_delay := '100 ms');
SELECT pgrelay.register('soak_pay', 'SELECT soak.effect(''soak_pay'', $1)',
  p_concurrency_mode := 'payload', p_max_attempts := 4, p_retry_delay := '100 ms');
SELECT pgrelay.register('soak_dedup', 'SELECT soak.dedup_effect($1)',
  p_deduplicate := true, p_max_attempts := 10, p_retry_delay := '100 ms');
SELECT pgrelay.register('soak_exp', 'SELECT soak.effect(''soak_exp'', $1)',
  p_max_attempts := 4, p_retry_delay := '100 ms', p_expire_after := '1 second');
SELECT pgrelay_notifier.create_channel('soak_mail', 'soak@pgrelay.localhost',
  p_max_attempts := 6, p_retry_delay := '100 ms');
SELECT pgrelay.register('soak_nats', 'soak.outbox', p_kind := 'nats',
  p_max_attempts := 8, p_retry_delay := '100 ms');
`

// soakFault is a kind of fault.
type soakFault string

const (
	faultKill      soakFault = "processor SIGKILL"
	faultPGRestart soakFault = "PostgreSQL restart"
	faultNATS      soakFault = "NATS restart"
	faultSMTPDown  soakFault = "SMTP down"
	faultSMTP451   soakFault = "SMTP refusing (451)"
)

var soakFaults = []soakFault{faultKill, faultPGRestart, faultNATS, faultSMTPDown, faultSMTP451}

// soakInvariant is one invariant checked after the run.
type soakInvariant struct {
	Name    string
	Checked int64    // the items it was checked on
	Broken  []string // examples of what broke, at most maxBroken
	more    int      // how many more broke
}

// soakResult is what a soak run found.
type soakResult struct {
	Seed          uint64
	Load, Drain   time.Duration
	Transactions  int64            // producer transactions committed
	ProducerFails int64            // producer transactions that failed (their events never existed)
	Events        map[string]int64 // committed events (distinct ids) per channel
	Outcomes      map[string]int64 // terminal log rows per event
	Faults        map[soakFault]int
	Emails        map[string]int64 // notifications per status; "caught": distinct Message-IDs
	Invariants    []*soakInvariant
	ProcStarts    int
	LogRows       int64
	Dir           string   // the work directory (the Processors' output)
	faultLog      []string // when each fault happened, for a failure's report
	invariantByID map[string]*soakInvariant
}

func (r *soakResult) committed() int64 {
	var n int64
	for _, v := range r.Events {
		n += v
	}
	return n
}

func (r *soakResult) faults() int {
	n := 0
	for _, v := range r.Faults {
		n += v
	}
	return n
}

// broken is the invariants that did not hold.
func (r *soakResult) broken() []*soakInvariant {
	var out []*soakInvariant
	for _, inv := range r.Invariants {
		if len(inv.Broken) > 0 {
			out = append(out, inv)
		}
	}
	return out
}

// inv is the invariant named name, created on first use in a fixed order.
func (r *soakResult) inv(name string) *soakInvariant {
	if r.invariantByID == nil {
		r.invariantByID = map[string]*soakInvariant{}
	}
	if x, ok := r.invariantByID[name]; ok {
		return x
	}
	x := &soakInvariant{Name: name}
	r.invariantByID[name] = x
	r.Invariants = append(r.Invariants, x)
	return x
}

// maxBroken bounds the examples an invariant keeps.
const maxBroken = 20

func (x *soakInvariant) add(format string, args ...any) {
	if len(x.Broken) < maxBroken {
		x.Broken = append(x.Broken, fmt.Sprintf(format, args...))
		return
	}
	x.more++
}

// soakEnv is the soak's world: PostgreSQL, NATS, the SMTP catcher, the
// Processor process.
type soakEnv struct {
	cfg  soakConfig
	res  *soakResult
	pg   *devenv.Postgres
	nats *devenv.NATS
	smtp *devenv.SMTP
	url  string
	pool *pgxpool.Pool
	dir  string

	procMu  sync.Mutex
	proc    *exec.Cmd
	procEnd chan struct{}
	killing bool     // the soak itself ends the current process
	stopped bool     // no more restarts
	exits   []string // Processors that exited on their own
	seq     atomic.Int64
}

// runSoak runs one soak and checks the invariants. An error is a failure of
// the soak's own machinery; violated invariants are in the result.
func runSoak(ctx context.Context, cfg soakConfig) (_ *soakResult, err error) {
	dir, err := os.MkdirTemp("", "pgrelay-soak-")
	if err != nil {
		return nil, fmt.Errorf("soak: make the work directory: %w", err)
	}
	res := &soakResult{Seed: cfg.Seed, Faults: map[soakFault]int{}, Events: map[string]int64{},
		Outcomes: map[string]int64{}, Emails: map[string]int64{}, Dir: dir}
	e := &soakEnv{cfg: cfg, res: res, dir: dir}
	defer func() {
		e.close()
		// The Processor's output stays for a failed run.
		if err == nil && len(res.broken()) == 0 {
			_ = os.RemoveAll(dir)
		}
	}()
	if err := e.start(ctx); err != nil {
		return res, err
	}
	rng := rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	if err := e.load(ctx, rng); err != nil {
		return res, err
	}
	if err := e.drain(ctx); err != nil {
		return res, err
	}
	if err := e.check(ctx); err != nil {
		return res, err
	}
	return res, nil
}

func (e *soakEnv) logf(format string, args ...any) {
	e.cfg.Logger.Info("soak: " + fmt.Sprintf(format, args...))
}

// start brings the world up: PostgreSQL (migrated, the soak's schema and
// channels), NATS with the outbox stream, the SMTP catcher, the Processor.
func (e *soakEnv) start(ctx context.Context) error {
	pg, err := devenv.StartPostgres(ctx, devenv.PostgresConfig{Logger: e.cfg.Logger})
	if err != nil {
		return err
	}
	e.pg = pg
	if err := pg.Exec(ctx, "postgres", "CREATE DATABASE pgrelay_soak"); err != nil {
		return err
	}
	e.url = pg.URL("pgrelay_soak")
	pcfg, err := pgxpool.ParseConfig(e.url)
	if err != nil {
		return fmt.Errorf("soak: parse the database URL: %w", err)
	}
	pcfg.MaxConns = 4
	if e.pool, err = pgxpool.NewWithConfig(ctx, pcfg); err != nil {
		return fmt.Errorf("soak: connect: %w", err)
	}
	if _, err := migrations.Up(ctx, e.pool); err != nil {
		return err
	}
	if _, err := e.pool.Exec(ctx, soakSchema); err != nil {
		return fmt.Errorf("soak: create the soak schema: %w", err)
	}
	if _, err := e.pool.Exec(ctx, soakChannels); err != nil {
		return fmt.Errorf("soak: register the soak channels: %w", err)
	}
	if e.nats, err = devenv.StartNATS(devenv.NATSConfig{StoreDir: filepath.Join(e.dir, "nats")}); err != nil {
		return err
	}
	if err := e.withJetStream(ctx, func(js jetstream.JetStream) error {
		_, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: soakOutboxStream,
			Subjects: []string{soakOutboxSubject}, Storage: jetstream.FileStorage, Duplicates: 10 * time.Minute})
		return err
	}); err != nil {
		return fmt.Errorf("soak: create the outbox stream: %w", err)
	}
	if e.smtp, err = devenv.StartSMTP(devenv.SMTPConfig{Logger: e.cfg.Logger}); err != nil {
		return err
	}
	e.smtp.RejectDomain(soakRejectDomain, 550, "no such domain")
	return e.startProcessor()
}

func (e *soakEnv) withJetStream(ctx context.Context, f func(js jetstream.JetStream) error) error {
	nc, err := nats.Connect(e.nats.URL())
	if err != nil {
		return fmt.Errorf("soak: connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("soak: JetStream: %w", err)
	}
	return f(js)
}

// processorArgs: a Processor that notices a dead instance in a second and
// takes its claims back, polls often, publishes often.
func (e *soakEnv) processorArgs() []string {
	return []string{"run", "--database-url", e.url, "--nats-url", e.nats.URL(), "--smtp-url", e.smtp.URL(),
		"--heartbeat-interval", "200ms", "--dead-after", "1s", "--poll-interval", "200ms",
		"--lease-grace", "5s", "--shutdown-timeout", "10s", "--nats-publish-interval", "50ms",
		"--log-level", "info"}
}

// startProcessor starts a Processor process and a goroutine that restarts
// it when it exits on its own (counted: it is an invariant that it does not).
func (e *soakEnv) startProcessor() error {
	e.procMu.Lock()
	defer e.procMu.Unlock()
	return e.startProcessorLocked()
}

func (e *soakEnv) startProcessorLocked() error {
	n := e.seq.Add(1)
	out, err := os.Create(filepath.Join(e.dir, fmt.Sprintf("processor-%03d.log", n)))
	if err != nil {
		return fmt.Errorf("soak: the Processor's log file: %w", err)
	}
	cmd := exec.Command(e.cfg.Exe, e.processorArgs()...)
	cmd.Env = append(os.Environ(), e.cfg.Env...)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		_ = out.Close()
		return fmt.Errorf("soak: start the Processor: %w", err)
	}
	e.res.ProcStarts++
	done := make(chan struct{})
	e.proc, e.procEnd, e.killing = cmd, done, false
	go func() {
		_ = cmd.Wait()
		_ = out.Close()
		close(done)
		e.procMu.Lock()
		defer e.procMu.Unlock()
		if e.proc != cmd || e.killing || e.stopped {
			return
		}
		e.exits = append(e.exits, fmt.Sprintf("processor %d (pid %d) exited by itself: %s (its output: %s)",
			n, cmd.Process.Pid, cmd.ProcessState, out.Name()))
		if err := e.startProcessorLocked(); err != nil {
			e.cfg.Logger.Error("soak: restart the Processor", "err", err)
		}
	}()
	return nil
}

// signalProcessor sends sig to the Processor and waits for it to exit
// (bounded by wait; then it is killed).
func (e *soakEnv) signalProcessor(sig syscall.Signal, wait time.Duration) error {
	e.procMu.Lock()
	cmd, done := e.proc, e.procEnd
	e.killing = true
	e.procMu.Unlock()
	if cmd == nil {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("soak: signal the Processor: %w", err)
	}
	select {
	case <-done:
		return nil
	case <-time.After(wait):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("soak: the Processor did not exit within %s of %s", wait, sig)
	}
}

func (e *soakEnv) close() {
	e.procMu.Lock()
	e.stopped = true
	e.procMu.Unlock()
	_ = e.signalProcessor(syscall.SIGKILL, 10*time.Second)
	if e.pool != nil {
		e.pool.Close()
	}
	if e.smtp != nil {
		_ = e.smtp.Close()
	}
	if e.nats != nil {
		e.nats.Stop()
	}
	if e.pg != nil {
		_ = e.pg.Stop()
	}
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// load runs the producers and the faults for the configured duration.
func (e *soakEnv) load(ctx context.Context, rng *rand.Rand) error {
	// The producer and the faults each draw from a generator of their own,
	// both seeded from rng: the one's draws do not shift the other's.
	prodRNG := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	faultRNG := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
	// The load lasts cfg.Duration, and at least until each kind of fault
	// came once.
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	firstRound := make(chan struct{})
	start := time.Now()
	var wg sync.WaitGroup
	var faultErr error
	wg.Go(func() {
		if faultErr = e.faults(lctx, faultRNG, firstRound); faultErr != nil {
			cancel()
		}
	})
	wg.Go(func() {
		if sleep(lctx, e.cfg.Duration) != nil {
			return
		}
		select {
		case <-firstRound:
		case <-lctx.Done():
		}
		cancel()
	})
	prodErr := e.produce(lctx, prodRNG)
	cancel()
	wg.Wait()
	e.res.Load = time.Since(start)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return errors.Join(prodErr, faultErr)
}

// produce runs producer transactions at cfg.Rate until ctx ends. Each
// notifies 1-3 events on random channels with random payload kinds and
// records them in soak.produced in the same transaction. A transaction that
// fails (PostgreSQL restarting) is counted and dropped: what it notified
// never existed.
func (e *soakEnv) produce(ctx context.Context, rng *rand.Rand) error {
	interval := time.Duration(float64(time.Second) / e.cfg.Rate)
	t := time.NewTicker(interval)
	defer t.Stop()
	var seq int
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		n := 1 + rng.IntN(3)
		ops := make([]soakOp, n)
		for i := range ops {
			seq++
			ops[i] = newSoakOp(rng, seq)
		}
		if err := e.produceTx(ctx, ops); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			e.res.ProducerFails++
			continue
		}
		e.res.Transactions++
	}
}

// soakOp is one event a producer transaction notifies.
type soakOp struct {
	channel string
	payload string // the event's payload; for email the recipient
}

// newSoakOp draws an event: channel by weight, payload kind by weight.
func newSoakOp(rng *rand.Rand, seq int) soakOp {
	kind := func() string {
		switch r := rng.IntN(100); {
		case r < 8:
			return "flaky"
		case r < 10:
			return "poison"
		case r < 12:
			return "commit"
		default:
			return "ok"
		}
	}
	switch r := rng.IntN(100); {
	case r < 25:
		return soakOp{soakNone, fmt.Sprintf("n%d:%s", seq, kind())}
	case r < 40:
		return soakOp{soakChan, fmt.Sprintf("c%d:%s", seq, kind())}
	case r < 55:
		// Payloads repeat: the payload mode's lanes see several events.
		return soakOp{soakPay, fmt.Sprintf("p%d:%s", rng.IntN(8), kind())}
	case r < 68:
		return soakOp{soakDedup, fmt.Sprintf("d%d", rng.IntN(16))}
	case r < 75:
		return soakOp{soakExp, fmt.Sprintf("x%d:ok", seq)}
	case r < 90:
		domain := soakMailDomain
		if rng.IntN(100) < 3 {
			domain = soakRejectDomain
		}
		return soakOp{soakMail, fmt.Sprintf("u%d@%s", seq, domain)}
	default:
		return soakOp{soakNATS, fmt.Sprintf("o%d", seq)}
	}
}

func (e *soakEnv) produceTx(ctx context.Context, ops []soakOp) error {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return pgx.BeginFunc(cctx, e.pool, func(tx pgx.Tx) error {
		for _, op := range ops {
			var id int64
			var version, nid *int64
			payload := op.payload
			switch op.channel {
			case soakDedup:
				if err := tx.QueryRow(cctx, `INSERT INTO soak.state (key, version) VALUES ($1, 1)
					ON CONFLICT (key) DO UPDATE SET version = soak.state.version + 1 RETURNING version`,
					op.payload).Scan(&version); err != nil {
					return err
				}
				if err := tx.QueryRow(cctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`, op.channel, op.payload).Scan(&id); err != nil {
					return err
				}
			case soakMail:
				if err := tx.QueryRow(cctx, `SELECT pgrelay_notifier.send($1, ARRAY[$2::text], 'soak ' || $2::text,
					'soak message to ' || $2::text)`, op.channel, op.payload).Scan(&nid); err != nil {
					return err
				}
				payload = strconv.FormatInt(*nid, 10)
				// send() notifies the notification's id: its queue row is
				// this transaction's (its id is the event's origin id).
				if err := tx.QueryRow(cctx, `SELECT q.id FROM pgrelay.queue q WHERE q.channel = $1 AND q.payload = $2`,
					op.channel, payload).Scan(&id); err != nil {
					return err
				}
			default:
				if err := tx.QueryRow(cctx, `SELECT pgrelay.notify($1::pg_catalog.text, $2::pg_catalog.text)`, op.channel, op.payload).Scan(&id); err != nil {
					return err
				}
			}
			if _, err := tx.Exec(cctx, `INSERT INTO soak.produced (id, channel, payload, version, notification_id)
				VALUES ($1, $2, $3, $4, $5)`, id, op.channel, payload, version, nid); err != nil {
				return err
			}
		}
		return nil
	})
}

// faults injects a fault every cfg.FaultEvery (±50%) until ctx ends. The
// kinds come in rounds, each a seeded shuffle of all of them; roundDone is
// closed when the first round is over (every kind came once).
func (e *soakEnv) faults(ctx context.Context, rng *rand.Rand, roundDone chan<- struct{}) error {
	var kinds []soakFault
	for n := 0; ; n++ {
		if n == len(soakFaults) {
			close(roundDone)
		}
		wait := e.cfg.FaultEvery/2 + time.Duration(rng.Int64N(int64(e.cfg.FaultEvery)))
		if sleep(ctx, wait) != nil {
			return nil
		}
		if len(kinds) == 0 {
			kinds = slices.Clone(soakFaults)
			rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
		}
		f := kinds[0]
		kinds = kinds[1:]
		// How long the outage lasts, where it has one: 0.5-2.5 s.
		outage := 500*time.Millisecond + time.Duration(rng.Int64N(int64(2*time.Second)))
		e.res.faultLog = append(e.res.faultLog, fmt.Sprintf("%s %s (%s)", time.Now().UTC().Format("15:04:05.000"), f, outage))
		e.logf("fault: %s", f)
		if err := e.inject(ctx, f, outage); err != nil {
			return fmt.Errorf("soak: inject %s: %w", f, err)
		}
		e.res.Faults[f]++
	}
}

func (e *soakEnv) inject(ctx context.Context, f soakFault, outage time.Duration) error {
	// A fault, once started, is carried to its end even when the load
	// phase ends meanwhile: the drain starts with everything up.
	ctx = context.WithoutCancel(ctx)
	switch f {
	case faultKill:
		// Down for the outage, as a crashed process waits for its restart:
		// events of the expiring channel may expire meanwhile.
		if err := e.signalProcessor(syscall.SIGKILL, 10*time.Second); err != nil {
			return err
		}
		_ = sleep(ctx, outage)
		return e.startProcessor()
	case faultPGRestart:
		return e.pg.Restart(ctx)
	case faultNATS:
		e.nats.Shutdown()
		_ = sleep(ctx, outage)
		return e.nats.Start()
	case faultSMTPDown:
		if err := e.smtp.Stop(); err != nil {
			return err
		}
		_ = sleep(ctx, outage)
		return e.smtp.Start()
	case faultSMTP451:
		e.smtp.RejectDomain(soakMailDomain, 451, "try again later")
		_ = sleep(ctx, outage)
		e.smtp.RejectDomain(soakMailDomain, 0, "")
		return nil
	}
	return fmt.Errorf("unknown fault %q", f)
}

// drain waits, with everything up and no producer, until nothing is
// pending, in flight or unpublished (bounded by cfg.DrainTimeout; what is
// left then is recorded as broken), then stops the Processor with SIGTERM.
func (e *soakEnv) drain(ctx context.Context) error {
	start := time.Now()
	deadline := start.Add(e.cfg.DrainTimeout)
	inv := e.res.inv("nothing is left pending, in flight or unpublished")
	for {
		done, err := e.drained(ctx)
		if err != nil {
			return err
		}
		if done {
			break
		}
		if time.Now().After(deadline) {
			if err := e.leftOver(ctx, inv); err != nil {
				return err
			}
			break
		}
		if err := sleep(ctx, 200*time.Millisecond); err != nil {
			return err
		}
	}
	e.res.Drain = time.Since(start)
	e.logf("drained in %s", e.res.Drain.Round(time.Millisecond))
	e.procMu.Lock()
	e.stopped = true
	e.procMu.Unlock()
	return e.signalProcessor(syscall.SIGTERM, 30*time.Second)
}

func (e *soakEnv) drained(ctx context.Context) (bool, error) {
	var done bool
	err := e.pool.QueryRow(ctx, `SELECT NOT EXISTS (SELECT FROM pgrelay.queue)
		AND NOT EXISTS (SELECT FROM pgrelay_notifier.notifications n WHERE n.status IN ('queued', 'sending'))
		AND EXISTS (SELECT FROM pgrelay.publish_cursors c WHERE c.source = 'log')
		AND NOT EXISTS (SELECT FROM pgrelay.publish_backlog() b WHERE b.backlog > 0)`).Scan(&done)
	if err != nil {
		// PostgreSQL may be finishing a restart the last fault started.
		if ctx.Err() == nil {
			return false, nil
		}
		return false, fmt.Errorf("soak: is the queue drained: %w", err)
	}
	return done, nil
}

// leftOver records what the drain left: queue rows, unfinished
// notifications, unpublished log rows.
func (e *soakEnv) leftOver(ctx context.Context, inv *soakInvariant) error {
	rows, err := e.pool.Query(ctx, `SELECT q.id, q.origin_id, q.channel, q.payload, q.attempt,
		q.dispatched_at IS NOT NULL, COALESCE(q.dispatched_by::text, '')
		FROM pgrelay.queue q ORDER BY q.id`)
	if err != nil {
		return fmt.Errorf("soak: read the queue's leftovers: %w", err)
	}
	var id, origin int64
	var ch, payload, by string
	var attempt int
	var inFlight bool
	if _, err := pgx.ForEachRow(rows, []any{&id, &origin, &ch, &payload, &attempt, &inFlight, &by}, func() error {
		inv.add("queue row %d (origin %d, %s %q, attempt %d) still %s %s after %s", id, origin, ch, payload, attempt,
			map[bool]string{true: "in flight by", false: "pending"}[inFlight], by, e.cfg.DrainTimeout)
		return nil
	}); err != nil {
		return fmt.Errorf("soak: read the queue's leftovers: %w", err)
	}
	var notifications, backlog int64
	if err := e.pool.QueryRow(ctx, `SELECT
		(SELECT count(*) FROM pgrelay_notifier.notifications n WHERE n.status IN ('queued', 'sending')),
		(SELECT COALESCE(sum(b.backlog), 0) FROM pgrelay.publish_backlog() b)`).Scan(&notifications, &backlog); err != nil {
		return fmt.Errorf("soak: count the leftovers: %w", err)
	}
	if notifications > 0 {
		inv.add("%d notifications still queued or sending", notifications)
	}
	if backlog > 0 {
		inv.add("%d log or notifier rows not published", backlog)
	}
	return nil
}

// check runs the invariants over the database, the catcher and the streams.
func (e *soakEnv) check(ctx context.Context) error {
	for _, c := range []func(context.Context) error{e.checkOutcomes, e.checkEffects, e.checkDedup, e.checkEmail,
		e.checkOutbox, e.checkStream} {
		if err := c(ctx); err != nil {
			return err
		}
	}
	// The drain's invariant covered every committed event.
	e.res.inv("nothing is left pending, in flight or unpublished").Checked = e.res.committed()
	inv := e.res.inv("the Processor never exits on its own")
	e.procMu.Lock()
	defer e.procMu.Unlock()
	inv.Checked = int64(e.res.ProcStarts)
	for _, x := range e.exits {
		inv.add("%s", x)
	}
	return nil
}

// queryEach runs sql and calls f on each row's values.
func (e *soakEnv) queryEach(ctx context.Context, what, sql string, dest []any, f func()) error {
	rows, err := e.pool.Query(ctx, sql)
	if err != nil {
		return fmt.Errorf("soak: %s: %w", what, err)
	}
	if _, err := pgx.ForEachRow(rows, dest, func() error { f(); return nil }); err != nil {
		return fmt.Errorf("soak: %s: %w", what, err)
	}
	return nil
}

// terminal are the log events that end an event.
const soakTerminal = `('succeeded', 'gave_up', 'expired', 'deduplicated')`

// checkOutcomes: every committed event, and every event the log knows, has
// exactly one terminal outcome; the log knows no event that was never
// committed (a 'deduplicated' row is the absorbed notify's own terminal
// outcome under a fresh id).
func (e *soakEnv) checkOutcomes(ctx context.Context) error {
	inv := e.res.inv("every committed event has exactly one terminal outcome")
	var ch string
	var n int64
	if err := e.queryEach(ctx, "count the committed events", `SELECT channel, count(DISTINCT id) FROM soak.produced GROUP BY channel`,
		[]any{&ch, &n}, func() { e.res.Events[ch] = n; inv.Checked += n }); err != nil {
		return err
	}
	var ev string
	if err := e.queryEach(ctx, "count the outcomes", `SELECT event, count(*) FROM pgrelay.log WHERE event IN `+soakTerminal+` GROUP BY event`,
		[]any{&ev, &n}, func() { e.res.Outcomes[ev] = n }); err != nil {
		return err
	}
	if err := e.pool.QueryRow(ctx, `SELECT count(*) FROM pgrelay.log`).Scan(&e.res.LogRows); err != nil {
		return fmt.Errorf("soak: count the log: %w", err)
	}
	var id int64
	var events string
	if err := e.queryEach(ctx, "committed events without exactly one terminal outcome", `
		WITH p AS (SELECT DISTINCT id, channel FROM soak.produced)
		SELECT p.id, p.channel, COALESCE(string_agg(l.event, ',' ORDER BY l.id), '(no log row)')
		  FROM p LEFT JOIN pgrelay.log l ON l.origin_id = p.id
		 GROUP BY p.id, p.channel
		HAVING count(*) FILTER (WHERE l.event IN `+soakTerminal+`) <> 1
		 ORDER BY p.id`, []any{&id, &ch, &events}, func() {
		inv.add("event %d (%s): log events %s", id, ch, events)
	}); err != nil {
		return err
	}
	inv2 := e.res.inv("the log holds only committed events, each ended once")
	if err := e.queryEach(ctx, "log events of unknown or twice-ended events", `
		SELECT l.origin_id, l.channel, string_agg(l.event, ',' ORDER BY l.id)
		  FROM pgrelay.log l
		 GROUP BY l.origin_id, l.channel
		HAVING (count(*) FILTER (WHERE l.event IN `+soakTerminal+`) <> 1)
		    OR (NOT bool_or(l.event = 'deduplicated')
		        AND NOT EXISTS (SELECT FROM soak.produced p WHERE p.id = l.origin_id))
		 ORDER BY l.origin_id`, []any{&id, &ch, &events}, func() {
		inv2.add("origin %d (%s): log events %s", id, ch, events)
	}); err != nil {
		return err
	}
	return e.pool.QueryRow(ctx, `SELECT count(DISTINCT origin_id) FROM pgrelay.log`).Scan(&inv2.Checked)
}

// checkEffects: a sql event's effect happened once if it succeeded, never
// otherwise. Per (channel, payload): effect rows = succeeded events (the
// payload channel's payloads repeat; the others' are one event each).
func (e *soakEnv) checkEffects(ctx context.Context) error {
	inv := e.res.inv("sql effects happened exactly once per succeeded event, never for others")
	var ch, payload string
	var succeeded, effects int64
	if err := e.queryEach(ctx, "compare the effects with the outcomes", `
		WITH p AS (SELECT DISTINCT id, channel, payload FROM soak.produced
		            WHERE channel IN ('soak_none', 'soak_chan', 'soak_pay', 'soak_dedup', 'soak_exp')),
		s AS (SELECT p.channel, p.payload, count(DISTINCT p.id) FILTER (WHERE EXISTS (SELECT FROM pgrelay.log l
		             WHERE l.origin_id = p.id AND l.event = 'succeeded')) AS n
		        FROM p GROUP BY p.channel, p.payload),
		f AS (SELECT channel, payload, count(*) AS n FROM soak.effects GROUP BY channel, payload)
		SELECT COALESCE(s.channel, f.channel), COALESCE(s.payload, f.payload), COALESCE(s.n, 0), COALESCE(f.n, 0)
		  FROM s FULL JOIN f ON f.channel = s.channel AND f.payload = s.payload
		 ORDER BY 1, 2`, []any{&ch, &payload, &succeeded, &effects}, func() {
		inv.Checked++
		if succeeded != effects {
			inv.add("%s %q: %d succeeded events, %d effect rows", ch, payload, succeeded, effects)
		}
	}); err != nil {
		return err
	}
	return nil
}

// checkDedup: a notify absorbed by a pending row of the dedup channel is
// covered by a run that started after it committed: each key's last run saw
// the key's last committed version.
func (e *soakEnv) checkDedup(ctx context.Context) error {
	inv := e.res.inv("each deduplicated key's last committed change was seen by a run")
	var key string
	var version, seen int64
	var lastOutcome string
	return e.queryEach(ctx, "compare the dedup keys' versions", `
		SELECT s.key, s.version, COALESCE((SELECT max(f.version) FROM soak.effects f
		                                   WHERE f.channel = 'soak_dedup' AND f.payload = s.key), 0),
		       COALESCE((SELECT l.event FROM soak.produced p JOIN pgrelay.log l ON l.origin_id = p.id
		                  WHERE p.channel = 'soak_dedup' AND p.payload = s.key AND p.version = s.version
		                    AND l.event IN `+soakTerminal+` LIMIT 1), '(none)')
		  FROM soak.state s ORDER BY s.key`, []any{&key, &version, &seen, &lastOutcome}, func() {
		inv.Checked++
		if seen != version {
			inv.add("key %s: last committed version %d, the last run saw %d (the last notify's event ended %s)",
				key, version, seen, lastOutcome)
		}
	})
}

// checkEmail: each notification was delivered at most once (one message
// per Message-ID at the catcher), exactly once when it is 'sent'; it ended
// sent or failed; its event succeeded exactly when it was sent.
func (e *soakEnv) checkEmail(ctx context.Context) error {
	inv := e.res.inv("each notification delivered at most once, exactly once unless failed")
	caught := map[int64]int{}
	for _, m := range e.smtp.Messages() {
		mid := strings.Trim(m.Header.Get("Message-Id"), "<>")
		local, _, _ := strings.Cut(mid, "@")
		id, err := strconv.ParseInt(local, 10, 64)
		if err != nil {
			inv.add("a message without a notification's Message-ID: %q", mid)
			continue
		}
		caught[id]++
	}
	e.res.Emails["caught"] = int64(len(caught))
	var nid, origin int64
	var status, outcome string
	var lastErr *string
	if err := e.queryEach(ctx, "read the notifications", `
		SELECT n.notification_id, p.id, n.status, n.last_error,
		       COALESCE((SELECT string_agg(l.event, ',' ORDER BY l.id) FROM pgrelay.log l
		                  WHERE l.origin_id = p.id AND l.event IN `+soakTerminal+`), '(none)')
		  FROM pgrelay_notifier.notifications n
		  LEFT JOIN soak.produced p ON p.notification_id = n.notification_id
		 ORDER BY n.notification_id`, []any{&nid, &origin, &status, &lastErr, &outcome}, func() {
		inv.Checked++
		e.res.Emails[status]++
		got := caught[nid]
		delete(caught, nid)
		why := ""
		if lastErr != nil {
			why = " (" + *lastErr + ")"
		}
		switch {
		case got > 1:
			inv.add("notification %d (event %d) delivered %d times; status %s, event %s", nid, origin, got, status, outcome)
		case status == "sent" && got != 1:
			inv.add("notification %d (event %d) is sent but was delivered %d times; event %s", nid, origin, got, outcome)
		case status != "sent" && status != "failed":
			inv.add("notification %d (event %d) ended %s; event %s", nid, origin, status, outcome)
		case status == "sent" && outcome != "succeeded":
			inv.add("notification %d (event %d) sent but its event ended %s", nid, origin, outcome)
		case status == "failed" && outcome == "succeeded":
			inv.add("notification %d (event %d) failed%s but its event succeeded", nid, origin, why)
		}
	}); err != nil {
		return err
	}
	for id, n := range caught {
		inv.add("%d messages for notification %d, which is not in the database", n, id)
	}
	return nil
}

// streamIDs reads every message of stream (filter: subjects) and returns
// how many times each id came, the id taken by idOf.
func (e *soakEnv) streamIDs(ctx context.Context, stream, filter string, idOf func(jetstream.Msg) (int64, error)) (map[int64]int, error) {
	out := map[int64]int{}
	err := e.withJetStream(ctx, func(js jetstream.JetStream) error {
		s, err := js.Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("stream %s: %w", stream, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("stream %s: %w", stream, err)
		}
		want := int(info.State.Msgs)
		cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{filter}})
		if err != nil {
			return fmt.Errorf("stream %s: consumer: %w", stream, err)
		}
		read := 0
		for read < want {
			batch, err := cons.Fetch(1000, jetstream.FetchMaxWait(2*time.Second))
			if err != nil {
				return fmt.Errorf("stream %s: fetch: %w", stream, err)
			}
			n := 0
			for m := range batch.Messages() {
				n++
				id, err := idOf(m)
				if err != nil {
					return fmt.Errorf("stream %s: message %s: %w", stream, m.Subject(), err)
				}
				out[id]++
			}
			if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) {
				return fmt.Errorf("stream %s: fetch: %w", stream, err)
			}
			if n == 0 {
				// Fewer messages on filter than in the stream.
				return nil
			}
			read += n
		}
		return nil
	})
	return out, err
}

// checkOutbox: every succeeded nats event is in the outbox stream, once.
func (e *soakEnv) checkOutbox(ctx context.Context) error {
	inv := e.res.inv("every succeeded nats event is in its stream once")
	got, err := e.streamIDs(ctx, soakOutboxStream, soakOutboxSubject, func(m jetstream.Msg) (int64, error) {
		return strconv.ParseInt(m.Headers().Get(jetstream.MsgIDHeader), 10, 64)
	})
	if err != nil {
		return fmt.Errorf("soak: read the outbox stream: %w", err)
	}
	var id int64
	var outcome string
	if err := e.queryEach(ctx, "read the nats events", `
		SELECT p.id, COALESCE((SELECT string_agg(l.event, ',' ORDER BY l.id) FROM pgrelay.log l
		                        WHERE l.origin_id = p.id AND l.event IN `+soakTerminal+`), '(none)')
		  FROM (SELECT DISTINCT id FROM soak.produced WHERE channel = 'soak_nats') p ORDER BY p.id`,
		[]any{&id, &outcome}, func() {
			inv.Checked++
			n := got[id]
			delete(got, id)
			if outcome == "succeeded" && n != 1 {
				inv.add("nats event %d succeeded, in the stream %d times", id, n)
			} else if n > 1 {
				inv.add("nats event %d ended %s, in the stream %d times", id, outcome, n)
			}
		}); err != nil {
		return err
	}
	for id, n := range got {
		inv.add("%d messages in the outbox stream for event %d, never committed", n, id)
	}
	return nil
}

// checkStream: every log row is in the status-event stream once, and the
// stream holds nothing else under pgrelay.events.
func (e *soakEnv) checkStream(ctx context.Context) error {
	inv := e.res.inv("every log row is in the event stream once")
	got, err := e.streamIDs(ctx, soakEventsStream, "pgrelay.events.>", func(m jetstream.Msg) (int64, error) {
		return strconv.ParseInt(m.Headers().Get(jetstream.MsgIDHeader), 10, 64)
	})
	if err != nil {
		return fmt.Errorf("soak: read the event stream: %w", err)
	}
	var id int64
	var ch, ev string
	if err := e.queryEach(ctx, "read the log", `SELECT id, channel, event FROM pgrelay.log ORDER BY id`,
		[]any{&id, &ch, &ev}, func() {
			inv.Checked++
			n := got[id]
			delete(got, id)
			if n != 1 {
				inv.add("log row %d (%s %s) is in the stream %d times", id, ch, ev, n)
			}
		}); err != nil {
		return err
	}
	for id, n := range got {
		inv.add("%d stream messages for log id %d, which is not in the log", n, id)
	}
	return nil
}

// report prints what broke, with the seed and the faults' times.
func (r *soakResult) report(w io.Writer) {
	broken := r.broken()
	if len(broken) == 0 {
		return
	}
	fmt.Fprintf(w, "soak seed %d: %d of %d invariants broken (work directory with the Processors' output: %s)\n",
		r.Seed, len(broken), len(r.Invariants), r.Dir)
	for _, inv := range broken {
		fmt.Fprintf(w, "  BROKEN: %s\n", inv.Name)
		for _, b := range inv.Broken {
			fmt.Fprintf(w, "    %s\n", b)
		}
		if inv.more > 0 {
			fmt.Fprintf(w, "    (%d more)\n", inv.more)
		}
	}
	fmt.Fprintf(w, "  faults: %s\n", strings.Join(r.faultLog, "; "))
}

// scenarioSoak is `pgrelay bench soak`: the Processor is this program
// started again as `pgrelay run`, so that a SIGKILL is a real one.
func (b *bench) scenarioSoak(ctx context.Context) (*scenarioResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("soak: find this program to start the Processor: %w", err)
	}
	seed := b.o.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	fmt.Fprintf(b.stderr, "pgrelay bench soak: seed %d, %s under faults (one every %s on average)\n",
		seed, b.o.Duration, b.o.FaultEvery)
	r, err := runSoak(ctx, soakConfig{Duration: b.o.Duration, Seed: seed, Rate: b.o.SoakRate,
		FaultEvery: b.o.FaultEvery, DrainTimeout: b.o.DrainTimeout, Exe: exe, Logger: b.logger})
	if r == nil {
		return nil, err
	}
	res := soakMeasurements(r)
	if err != nil {
		return res, fmt.Errorf("seed %d: %w", seed, err)
	}
	r.report(b.stderr)
	if broken := r.broken(); len(broken) > 0 {
		var names []string
		for _, x := range broken {
			names = append(names, x.Name)
		}
		return res, fmt.Errorf("seed %d: %d of %d invariants broken: %s", seed, len(broken), len(r.Invariants),
			strings.Join(names, "; "))
	}
	return res, nil
}

// soakMeasurements are a soak's figures as the bench reports them.
func soakMeasurements(r *soakResult) *scenarioResult {
	res := &scenarioResult{Name: "soak"}
	join := func(m map[string]int64, keys ...string) string {
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
		}
		return strings.Join(parts, ", ")
	}
	ev := res.add(newMeasurement("committed events", "pgrelay", r.committed(), r.Load, "events/s"))
	ev.Detail = fmt.Sprintf("seed %d; %d transactions (%d failed during faults); ", r.Seed, r.Transactions, r.ProducerFails) +
		join(r.Events, soakNone, soakChan, soakPay, soakDedup, soakExp, soakMail, soakNATS)
	var terminal int64
	for _, n := range r.Outcomes {
		terminal += n
	}
	out := res.add(&measurement{Name: "terminal outcomes", System: "pgrelay", Events: terminal, Counted: true})
	out.Detail = join(r.Outcomes, "succeeded", "gave_up", "expired", "deduplicated") +
		fmt.Sprintf("; %d log rows; emails: ", r.LogRows) + join(r.Emails, "sent", "failed", "caught")
	var faults []string
	for _, f := range soakFaults {
		faults = append(faults, fmt.Sprintf("%s %d", f, r.Faults[f]))
	}
	fm := res.add(&measurement{Name: "faults injected", System: "pgrelay", Events: int64(r.faults()), Seconds: secs(r.Load), Counted: true})
	fm.Detail = strings.Join(faults, ", ") + fmt.Sprintf("; %d Processor starts", r.ProcStarts)
	held := 0
	var names []string
	for _, inv := range r.Invariants {
		verdict := "held"
		if len(inv.Broken) > 0 {
			verdict = fmt.Sprintf("BROKEN %d times", len(inv.Broken)+inv.more)
		} else {
			held++
		}
		names = append(names, fmt.Sprintf("%s: %s (%d checked)", inv.Name, verdict, inv.Checked))
	}
	im := res.add(&measurement{Name: "invariants held", System: "pgrelay", Events: int64(held), Counted: true})
	im.Detail = fmt.Sprintf("%d of %d: ", held, len(r.Invariants)) + strings.Join(names, "; ")
	dm := res.add(&measurement{Name: "drain after the faults", System: "pgrelay", Seconds: secs(r.Drain), Counted: true})
	dm.Detail = "until nothing is pending, in flight or unpublished"
	return res
}
