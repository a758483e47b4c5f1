package bench_test

import (
	"os"
	"testing"

	"github.com/pgrelay/pgrelay/internal/cli/clitest"
	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

// The bench's tests run `pgrelay bench` as the command line does; the soak
// starts its Processors as this test binary (clitest.RunMainEnv).
func TestMain(m *testing.M) { os.Exit(clitest.Main(m, &pg)) }

// cliMain runs the command line in this process.
var cliMain = clitest.Run
