package devenv_test

import (
	"os/exec"
	"strings"
	"testing"
)

// The pgrelay binary starts its throwaway PostgreSQL, NATS and SMTP catcher
// (`pgrelay dev`, `pgrelay bench`) from this package; nothing of the test
// layer may come with it: neither the testing package, testify nor
// internal/testenv is linked into cmd/pgrelay.
func TestBinaryLinksNoTestCode(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/pgrelay/pgrelay/cmd/pgrelay").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps cmd/pgrelay: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	if len(deps) == 0 {
		t.Fatal("go list -deps cmd/pgrelay listed nothing")
	}
	var linked []string
	for _, p := range deps {
		if p == "testing" || strings.HasPrefix(p, "testing/") ||
			strings.HasPrefix(p, "github.com/stretchr/testify") ||
			p == "github.com/pgrelay/pgrelay/internal/testenv" {
			linked = append(linked, p)
		}
	}
	if len(linked) > 0 {
		t.Fatalf("cmd/pgrelay links test-only packages: %s", strings.Join(linked, ", "))
	}
}
