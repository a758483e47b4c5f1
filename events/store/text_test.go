package store

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestStorableText(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain reply", "plain reply"},
		{"550 no\xff such\x00 box \xc3(", "550 no\uFFFD such box \uFFFD("},
		{"\x00\x00", ""},
		{"héllo", "héllo"},
	} {
		require.Equal(t, tc.want, StorableText(tc.in), "%q", tc.in)
	}
	long := strings.Repeat("é", MaxText) // two bytes each: the cut falls inside one
	got := StorableText(long)
	require.LessOrEqual(t, len(got), MaxText)
	require.True(t, utf8.ValidString(got))
	require.True(t, strings.HasSuffix(got, textCut))
	require.Equal(t, strings.Repeat("x", MaxText), StorableText(strings.Repeat("x", MaxText)), "at the limit: kept")
}
