package processor_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		// The child process of TestGoHandleTxKilledMidTransaction: no
		// cluster of its own, no tests.
		runKilledChild(url)
	}
	ignore := goleak.IgnoreCurrent() // what runs before any test is not a leak
	code := testenv.MainWithPostgres(m, &pg)
	if code == 0 {
		if err := goleak.Find(ignore, ignoreDeadLetterThrottle()); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}

// ignoreDeadLetterThrottle: the actor library's dead-letter log throttle
// starts a goroutine that ends by itself one throttle interval (1 s) after a
// dead letter, such as a message to an actor of a Processor that has just
// stopped. It belongs to no Processor and outlives none for long.
func ignoreDeadLetterThrottle() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")
}
