package pgrelaytest_test

import (
	"os"
	"testing"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	os.Exit(testenv.MainWithPostgresNoLeaks(m, &pg))
}
