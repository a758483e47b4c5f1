package cli

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Clock skew is the spread of the nodes' clocks as measured from this
// machine: beyond the limit it is a problem naming the fastest and the
// slowest node; within it, or with one node, nothing.
func TestSkewFindings(t *testing.T) {
	nodes := []*doctorNode{
		{label: "a:5432/app", skew: 300 * time.Millisecond},
		{label: "b:5432/app", skew: -900 * time.Millisecond},
		{label: "c:5432/app", skew: 100 * time.Millisecond},
	}
	fs := skewFindings(nodes, time.Second)
	require.Len(t, fs, 1)
	require.Equal(t, "clock-skew", fs[0].ID)
	require.Equal(t, severityProblem, fs[0].Severity)
	require.Contains(t, fs[0].Message, "the clock of a:5432/app is 1.2s ahead of b:5432/app's (more than 1s)")
	require.Empty(t, skewFindings(nodes, 1200*time.Millisecond))
	require.Empty(t, skewFindings(nodes[:1], 0))
}

// search_path values as SHOW and pg_db_role_setting give them.
func TestSplitSearchPath(t *testing.T) {
	require.Equal(t, []string{"$user", "public"}, splitSearchPath(`"$user", public`))
	require.Equal(t, []string{"App", "b,c", `d"e`, "x"}, splitSearchPath(`"App", "b,c" ,"d""e",X`))
	require.Empty(t, splitSearchPath(""))
}
