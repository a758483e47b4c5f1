package pgrelaytest_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/pgrelay/pgrelay/internal/testenv"
)

var pg *testenv.Postgres

func TestMain(m *testing.M) {
	ignore := goleak.IgnoreCurrent() // what runs before any test is not a leak
	code := testenv.MainWithPostgres(m, &pg)
	if code == 0 {
		if err := goleak.Find(ignore); err != nil {
			os.Stderr.WriteString("goroutine leak: " + err.Error() + "\n")
			code = 1
		}
	}
	os.Exit(code)
}
