package processor_test

import (
	"os"
	"testing"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	if url := os.Getenv(childEnv); url != "" {
		// The child process of TestGoHandleTxKilledMidTransaction: no
		// cluster of its own, no tests.
		runKilledChild(url)
	}
	os.Exit(testenv.MainWithPostgresNoLeaks(m, &pg))
}
