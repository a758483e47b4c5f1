package cli

import (
	"flag"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Arguments (the bench's scenario names) may come before, between and after
// the flags.
func TestParseMixed(t *testing.T) {
	a := &app{stderr: io.Discard, getenv: func(string) string { return "" }}
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	n := fs.Int("n", 0, "")
	v := fs.Bool("v", false, "")
	pos, err := a.parseMixed(fs, []string{"a", "-n", "3", "b", "-v", "c", "--", "-n", "d"})
	require.NoError(t, err)
	assert.Equal(t, []string{"a", "b", "c", "-n", "d"}, pos)
	assert.Equal(t, 3, *n)
	assert.True(t, *v)
}
