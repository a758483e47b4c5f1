package actors_test

// Outcomes whose texts come from outside (an SMTP server's reply, a
// handler's error) and writes of outcomes the database refuses: every
// outcome is recorded, none stops the others, nothing runs twice.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/handlers"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// An SMTP server whose reply holds bytes that are not UTF-8 and a NUL byte
// (its AUTH LOGIN exchange goes wrong; the client's error quotes the reply as
// it came): the notifier's debug log, status and status history and
// pgrelay.log record the failures (invalid bytes as U+FFFD, NUL removed),
// and the other channel's messages, on a sound server, are each sent exactly
// once with every outcome written.
func TestActorEmailUnstorableReplyText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	good := catcher(t, devenv.SMTPConfig{})
	broken := catcher(t, devenv.SMTPConfig{Username: "app", Password: "secret",
		LoginChallenge: []byte("no\xff entry\x00 here \xc3(")})
	e.Exec(`SELECT pgrelay_notifier.create_channel('mail', 'app@shop.example')`)
	e.Exec(`SELECT pgrelay_notifier.create_channel('broken', 'app@shop.example', p_max_attempts := 3,
		p_retry_delay := '50 milliseconds')`)
	e.Exec(`SELECT pgrelay_notifier.send('mail', ARRAY['u' || g || '@good.example'], 's', 'b') FROM generate_series(1, 20) g`)
	e.Exec(`SELECT pgrelay_notifier.send('broken', ARRAY['u' || g || '@good.example'], 's', 'b') FROM generate_series(1, 2) g`)
	e.startProcessor(func(c *actors.Config) {
		c.SMTPURL = good.URL()
		c.SMTPChannels = map[string]string{"broken": strings.Replace(broken.URL(), "auth=plain", "auth=login", 1)}
		c.LeaseGrace = 5 * time.Second // an outcome never written would have its claim rescued: a second send
	})

	testenv.Eventually(e.T, time.Minute, "every event to end", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.queue`) == 0 &&
			e.Count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('succeeded', 'gave_up')`) == 22
	})
	require.Equal(t, 20, e.statusCount("sent"))
	require.Equal(t, 2, e.statusCount("failed"))
	require.Zero(t, broken.Count())
	require.Equal(t, 20, good.Count(), "no message was sent twice")
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event IN ('rescued', 'failed', 'gave_up')
		AND channel = 'mail'`))

	// The reply as stored: U+FFFD for the invalid bytes, without the NUL.
	const reply = `'%no' || U&'\FFFD' || ' entry here ' || U&'\FFFD' || '(%'`
	for _, n := range e.notifications("WHERE status = 'failed'") {
		require.NotNil(t, n.LastError)
		require.Contains(t, *n.LastError, "no\uFFFD entry here \uFFFD(")
		require.NotContains(t, *n.LastError, "\x00")
	}
	require.Equal(t, 4, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'broken' AND event = 'failed'
		AND error LIKE `+reply))
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay.log WHERE channel = 'broken' AND event = 'gave_up'
		AND attempt = 3 AND error LIKE `+reply))
	require.Equal(t, 2, e.Count(`SELECT count(*) FROM pgrelay_notifier.status_events
		WHERE status = 'failed' AND error LIKE `+reply))
	require.Equal(t, 6, e.Count(`SELECT count(*) FROM pgrelay_notifier.debug_log WHERE message LIKE `+reply),
		"one note per attempt")
}

// The completer given outcomes it cannot write as they are: an error text
// that is not UTF-8 and holds a NUL byte is stored cleaned; an outcome the
// database refuses for its error text (a trigger raising a data exception
// stands in for any such refusal) is isolated from the batch it came in and
// recorded with a placeholder reason; an outcome refused whatever its text
// is held back and retried on its own (its own text first) while every
// other outcome is written, and recorded once the database takes it.
// Nothing runs twice.
func TestActorCompleterIsolatesRefusedOutcomes(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := context.Background()
	e.Exec(`CREATE TABLE public.refuse (origin_id bigint)`)
	// Every write of the log waits while the test holds lock 4242.
	e.Exec(`CREATE FUNCTION public.refuse_log() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  PERFORM pg_advisory_xact_lock_shared(4242);
	  IF NEW.error LIKE '%poison%' OR NEW.origin_id IN (SELECT r.origin_id FROM public.refuse r) THEN
	    RAISE EXCEPTION 'refused by the test' USING ERRCODE = '22023';
	  END IF;
	  RETURN NEW;
	END $$`)
	e.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON pgrelay.log FOR EACH ROW EXECUTE FUNCTION public.refuse_log()`)
	e.Exec(`SELECT pgrelay.register('out', 'out.subject', p_kind := 'nats', p_max_attempts := 1)`)
	var all []string
	for i := range 50 {
		all = append(all, fmt.Sprintf("ok-%d", i))
	}
	all = append(all, "binary", "poison", "stuck")
	e.Exec(`SELECT pgrelay.notify_many('out', $1)`, all)
	e.Exec(`INSERT INTO public.refuse SELECT origin_id FROM pgrelay.queue WHERE payload = 'stuck'`)
	lock, err := e.Pool.Acquire(ctx)
	require.NoError(t, err)
	defer lock.Release()
	_, err = lock.Exec(ctx, `SELECT pg_advisory_lock(4242)`)
	require.NoError(t, err)

	errs := map[string]error{
		"binary": errors.New("reply \xff\xfe with a NUL\x00 byte"),
		"poison": errors.New("poison pill"),
		"stuck":  errors.New("stuck"),
	}
	var ran atomic.Int32
	gate := make(chan struct{})
	p := e.startProcessor(func(c *actors.Config) {
		c.Concurrency = 64
		c.Handlers = handlers.Registry{"nats": handlers.HandlerFunc(func(ctx context.Context, ev handlers.Event) (bool, error) {
			ran.Add(1)
			if ev.Payload != "ok-0" {
				<-gate
			}
			return false, errs[ev.Payload]
		})}
	})
	// ok-0's outcome is written alone, and waits for the lock; the other
	// 52 arrive meanwhile and are written together.
	pending := func() int { return int(testutil.ToFloat64(p.Metrics().PendingOutcomes)) }
	testenv.Eventually(e.T, time.Minute, "the first outcome to be written", func() bool { return pending() == 1 })
	close(gate)
	testenv.Eventually(e.T, time.Minute, "every outcome to reach the completer", func() bool { return pending() == 53 })
	_, err = lock.Exec(ctx, `SELECT pg_advisory_unlock(4242)`)
	require.NoError(t, err)

	testenv.Eventually(e.T, time.Minute, "every outcome but the refused one to be written", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log`) == 52
	})
	require.Equal(t, 50, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`))
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'
		AND error = 'reply ' || U&'\FFFD' || ' with a NUL byte'`))
	poison := e.Text(`SELECT error FROM pgrelay.log WHERE event = 'gave_up' AND error LIKE 'pgrelay could not record%'`)
	require.Contains(t, poison, "SQLSTATE 22023")
	require.Equal(t, 1, e.Count(`SELECT count(*) FROM pgrelay.queue WHERE payload = 'stuck'`),
		"the refused outcome is still held, its claim too")
	require.Equal(t, 1, pending())

	// Written with its own text, or with the placeholder when the database
	// takes it back between the two writes of a retry.
	e.Exec(`DELETE FROM public.refuse`)
	testenv.Eventually(e.T, time.Minute, "the held outcome to be written", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'gave_up'
		  AND (error = 'stuck' OR error LIKE 'pgrelay could not record%')`) == 2
	})
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
	require.Equal(t, 53, e.Count(`SELECT count(*) FROM pgrelay.log`))
	require.Equal(t, int32(53), ran.Load(), "no event ran twice")
}

// While the completer cannot write (the database fails every write of the
// log), outcomes pile up to a bound and the claimer stops claiming: the
// events claimed and not written stay within the bound plus the concurrency.
// Once the database takes writes again, every outcome is written.
func TestActorCompleterBackPressure(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.Exec(`CREATE TABLE public.fail_writes (on_ bool)`)
	e.Exec(`INSERT INTO public.fail_writes VALUES (true)`)
	e.Exec(`CREATE FUNCTION public.fail_log() RETURNS trigger LANGUAGE plpgsql AS $$
	BEGIN
	  IF EXISTS (SELECT FROM public.fail_writes) THEN
	    RAISE EXCEPTION 'the log is not writable' USING ERRCODE = '55000';
	  END IF;
	  RETURN NEW;
	END $$`)
	e.Exec(`CREATE TRIGGER fail_log BEFORE INSERT ON pgrelay.log FOR EACH ROW EXECUTE FUNCTION public.fail_log()`)
	e.Exec(`SELECT pgrelay.register('out', 'out.subject', p_kind := 'nats')`)
	var ran atomic.Int64
	var wakes atomic.Int64
	const concurrency = 8
	const bound = 1000 + concurrency // the completer's bound (at least 1000) plus the concurrency
	p := e.startProcessor(func(c *actors.Config) {
		c.Concurrency = concurrency
		c.BatchSize = 100
		c.Handlers = handlers.Registry{"nats": handlers.HandlerFunc(func(ctx context.Context, ev handlers.Event) (bool, error) {
			ran.Add(1)
			return false, nil
		})}
		actors.SetTestHook(c, func(name string, msg any) {
			if name == "claimer" && fmt.Sprintf("%T", msg) == "*actors.wake" {
				wakes.Add(1)
			}
		})
	})
	e.Exec(`SELECT pgrelay.notify_many('out', $1)`, payloads("e", 3000))
	testenv.Eventually(e.T, time.Minute, "outcomes to pile up to the bound", func() bool {
		return testutil.ToFloat64(p.Metrics().PendingOutcomes) >= 1000
	})
	// Several claimer wake-ups (polls) later, nothing more was claimed.
	w := wakes.Load()
	testenv.Eventually(e.T, 30*time.Second, "five more wake-ups of the claimer", func() bool { return wakes.Load() >= w+5 })
	claimed := e.Count(`SELECT count(*) FROM pgrelay.queue WHERE dispatched_at IS NOT NULL`)
	require.LessOrEqual(t, claimed, bound, "claims held back")
	require.LessOrEqual(t, int(ran.Load()), bound)
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.log`))

	e.Exec(`DELETE FROM public.fail_writes`)
	testenv.Eventually(e.T, 2*time.Minute, "every event to succeed", func() bool {
		return e.Count(`SELECT count(*) FROM pgrelay.log WHERE event = 'succeeded'`) == 3000
	})
	require.Equal(t, int64(3000), ran.Load(), "no event ran twice")
	require.Zero(t, e.Count(`SELECT count(*) FROM pgrelay.queue`))
}
