package bench_test

import (
	"encoding/json"
	"flag"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/pgrelay/pgrelay/internal/cli/clitest"
)

// The integrity suite's knobs: `go test -run TestIntegritySoak ./internal/bench
// -args -soak-duration=10m -soak-seed=N` runs the long form (raise -timeout).
var (
	soakDuration = flag.Duration("soak-duration", 40*time.Second, "TestIntegritySoakShort: how long the workload runs under faults")
	soakSeed     = flag.Uint64("soak-seed", 20261201, "TestIntegritySoakShort: the workload's and the faults' seed")
	soakFaults   = flag.Duration("soak-fault-every", 3*time.Second, "TestIntegritySoakShort: mean time between two faults")
)

// TestIntegritySoakShort is the integrity suite's short form: `pgrelay bench
// soak` with a fixed seed. A real `pgrelay run` process (this test binary
// acting as the command) dispatches a mixed workload — sql channels in the
// three concurrency modes with deduplication and expiry, handlers failing at
// random, always, and at COMMIT, email to the SMTP catcher, a nats outbox —
// while it is killed with SIGKILL, PostgreSQL and NATS restart and the SMTP
// server goes down or answers 451. After a drain the run must hold every
// invariant: one terminal outcome per committed event, sql effects exactly
// once, each notification delivered at most once (once unless failed), every
// log row in the stream once, nothing left pending, in flight or unpublished.
//
// What it finds on the code it was written against (commit 5a9ab90): with
// seed 20261201 the sql channel soak_none stops at its first event whose
// handler fails at COMMIT (payload "n119:commit", through the deferred
// constraint trigger soak.fail_at_commit): the Processor logs "a batch
// failed; its events are pending again" for the batch of 8 events of
// soak_none every 5 s, and likewise for a batch of lane heads holding
// "c637:commit" of soak_chan, without the event's attempt ever counting. That
// event and every later event of soak_none stay pending with no log row
// after the 2-minute drain (the first: event 121262273917353990), and
// soak_pay lanes stay at 'failed' without a terminal outcome. Broken:
// "nothing is left pending, in flight or unpublished", "every committed
// event has exactly one terminal outcome", "the log holds only committed
// events, each ended once". Without the COMMIT-failing payloads the same
// seed holds all nine invariants (so do seeds 1 and 2); with a handler that
// records its effect twice "sql effects happened exactly once" breaks. The
// long form (docs/reliability.md, 10 minutes, same seed) also found a
// notification delivered twice across a PostgreSQL restart: notification
// 121264636593963016, event 121264636593963018, status sent, event
// succeeded, two messages with its Message-ID at the catcher.
func TestIntegritySoakShort(t *testing.T) {
	if testing.Short() {
		t.Skip("the integrity suite runs for about a minute")
	}
	// The bench starts the Processor as this program: as this test binary,
	// it must act as the pgrelay command (TestMain).
	t.Setenv(clitest.RunMainEnv, "1")
	seed := strconv.FormatUint(*soakSeed, 10)
	code, out, errOut := cliMain("bench", "soak", "--duration", soakDuration.String(), "--seed", seed,
		"--fault-every", soakFaults.String(), "--drain-timeout", "2m", "--json")
	rerun := "go test -count=1 -run TestIntegritySoakShort ./internal/bench -args -soak-seed=" + seed +
		" -soak-duration=" + soakDuration.String() + " -soak-fault-every=" + soakFaults.String()
	require.Equal(t, 0, code, "soak seed %s failed; rerun with: %s\nstderr:\n%s\nstdout:\n%s", seed, rerun, errOut, out)
	var doc benchDoc
	require.NoError(t, json.Unmarshal([]byte(out), &doc), out)
	events := doc.measure(t, "soak", "committed events", "pgrelay")
	faults := doc.measure(t, "soak", "faults injected", "pgrelay")
	outcomes := doc.measure(t, "soak", "terminal outcomes", "pgrelay")
	held := doc.measure(t, "soak", "invariants held", "pgrelay")
	t.Logf("soak seed %s: %d events (%s); %d faults (%s); %s", seed, events.Events, outcomes.Detail,
		faults.Events, faults.Detail, held.Detail)
	// The run did what it claims: events flowed, each kind of fault came,
	// and every invariant was checked.
	require.Greater(t, events.Events, 500, events.Detail)
	require.GreaterOrEqual(t, faults.Events, 5, faults.Detail)
	require.NotRegexp(t, `[a-zA-Z)] 0[,;]`, faults.Detail, "every kind of fault at least once")
	require.Equal(t, 9, held.Events, held.Detail)
}
