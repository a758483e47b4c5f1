// Package clitest runs the pgrelay command line in the tests of the packages
// behind it (internal/cli, internal/bench): in process, or as a subprocess
// that is the test binary acting as the command. Tests only import it.
package clitest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"testing"

	"github.com/pgrelay/pgrelay/internal/cli"
	"github.com/pgrelay/pgrelay/internal/devenv"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

// RunMainEnv, when set to "1", makes a test binary whose TestMain is Main
// act as the pgrelay command: Main runs cli.Main on the process's arguments
// instead of the tests. Subprocess tests (and the bench's soak, which starts
// its Processors as this program) re-execute the test binary this way, so
// they run exactly the code of cmd/pgrelay (os.Exit(cli.Main(os.Args[1:],
// ...))) without a separate `go build`.
const RunMainEnv = "PGRELAY_CLI_TEST_RUN_MAIN"

// NATSNodeEnv, when set to a devenv.NATSConfig as JSON, makes a test binary
// whose TestMain is Main run that NATS server (devenv's, the nats-server
// library) instead of the tests, until SIGTERM or SIGINT stops it or SIGKILL
// ends the process. It prints "ready" once the server accepts connections.
// A test that must lose a server abruptly (no leader step-down, no flush of
// its store, connections dropped without a word, as a crash does) runs it as
// such a process and kills it: an in-process server's Shutdown does all of
// those gracefully.
const NATSNodeEnv = "PGRELAY_CLI_TEST_NATS_NODE"

// Main is a TestMain for tests of the command line; it returns the exit
// code for os.Exit. As the command (RunMainEnv) it runs cli.Main. Else it
// runs the tests against one throwaway PostgreSQL, stored in *pg, without
// the outer environment's PGRELAY_ variables, and fails the run when a
// goroutine leaked.
func Main(m *testing.M, pg **testenv.Postgres) int {
	if cfg := os.Getenv(NATSNodeEnv); cfg != "" {
		return natsNode(cfg)
	}
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
	return testenv.MainWithPostgresNoLeaks(m, pg)
}

// Run runs the command line in this process.
func Run(args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	code = cli.Main(args, &out, &errb)
	return code, out.String(), errb.String()
}

// natsNode runs the NATS server of cfg (NATSNodeEnv) until a signal stops it.
func natsNode(cfg string) int {
	var c devenv.NATSConfig
	if err := json.Unmarshal([]byte(cfg), &c); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", NATSNodeEnv, err)
		return 2
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	n, err := devenv.StartNATS(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("ready")
	<-stop
	n.Stop()
	return 0
}
