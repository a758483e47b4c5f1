package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// A bulk retry or discard asks on a terminal and acts only on a yes; without
// a terminal it needs --yes and reads nothing.
func TestDeadConfirm(t *testing.T) {
	t.Parallel()
	for answer, ok := range map[string]bool{"y\n": true, "YES\n": true, " yes ": true, "n\n": false, "\n": false, "": false} {
		var prompt bytes.Buffer
		a := &app{stderr: &prompt, stdin: strings.NewReader(answer), terminal: true}
		err := a.confirm(false, "retry 3 dead letters?")
		require.Equal(t, "retry 3 dead letters? [y/N] ", prompt.String())
		if ok {
			require.NoError(t, err, "%q", answer)
		} else {
			require.Error(t, err, "%q", answer)
		}
	}
	a := &app{stderr: &bytes.Buffer{}, stdin: strings.NewReader("y\n")}
	var ue *usageError
	require.True(t, errors.As(a.confirm(false, "q?"), &ue))
	require.Contains(t, ue.msg, "needs --yes")
	require.NoError(t, a.confirm(true, "q?"))
	a.terminal = true
	require.NoError(t, a.confirm(true, "q?"), "--yes asks nothing")
}
