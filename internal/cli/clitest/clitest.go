// Package clitest runs the pgrelay command line in the tests of the packages
// behind it (internal/cli, internal/bench): in process, or as a subprocess
// that is the test binary acting as the command. Tests only import it.
package clitest

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/pgrelay/pgrelay/internal/cli"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// RunMainEnv, when set to "1", makes a test binary whose TestMain is Main
// act as the pgrelay command: Main runs cli.Main on the process's arguments
// instead of the tests. Subprocess tests (and the bench's soak, which starts
// its Processors as this program) re-execute the test binary this way, so
// they run exactly the code of cmd/pgrelay (os.Exit(cli.Main(os.Args[1:],
// ...))) without a separate `go build`.
const RunMainEnv = "PGRELAY_CLI_TEST_RUN_MAIN"

// Main is a TestMain for tests of the command line; it returns the exit
// code for os.Exit. As the command (RunMainEnv) it runs cli.Main. Else it
// runs the tests against one throwaway PostgreSQL, stored in *pg, without
// the outer environment's PGRELAY_ variables, and fails the run when a
// goroutine leaked.
func Main(m *testing.M, pg **testenv.Postgres) int {
	if os.Getenv(RunMainEnv) == "1" {
		return cli.Main(os.Args[1:], os.Stdout, os.Stderr)
	}
	// Every flag reads PGRELAY_<FLAG>: an outer environment must not change
	// what the tests see. PGRELAY_PG_BIN is devenv's, not a flag.
	for _, kv := range os.Environ() {
		if name, _, _ := strings.Cut(kv, "="); strings.HasPrefix(name, "PGRELAY_") && name != "PGRELAY_PG_BIN" {
			os.Unsetenv(name)
		}
	}
	// The snapshot of goroutines to ignore is taken before anything starts:
	// taken after the tests (goleak.Find(goleak.IgnoreCurrent())) it would
	// ignore every goroutine still running, leaks included.
	ignore := goleak.IgnoreCurrent()
	code := testenv.MainWithPostgres(m, pg)
	if code == 0 {
		if err := goleak.Find(ignore, ignoreDeadLetterThrottle()); err != nil {
			fmt.Fprintln(os.Stderr, "goroutine leak:", err)
			code = 1
		}
	}
	return code
}

// Run runs the command line in this process.
func Run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// ignoreDeadLetterThrottle: the actor library's dead-letter log throttle
// starts a goroutine that ends by itself one throttle interval (1 s) after a
// dead letter, such as a message to an actor of a Processor that has just
// stopped. It belongs to no Processor and outlives none for long.
func ignoreDeadLetterThrottle() goleak.Option {
	return goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1")
}
