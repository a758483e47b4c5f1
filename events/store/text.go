package store

import (
	"strings"
	"unicode/utf8"
)

// MaxText is the most bytes of a text from outside pgrelay that is written
// to the database: an error of a handler (a server's reply, a driver's
// message), a reason in the notifier's status history, a note of its debug
// log. Longer texts are cut, at a character boundary, and end with
// textCut.
const MaxText = 8000

// textCut ends a text StorableText cut.
const textCut = " … (cut)"

// StorableText returns s as PostgreSQL can store it in a text column: a
// byte sequence that is not valid UTF-8 is replaced by U+FFFD, NUL bytes
// (which no PostgreSQL text may hold) are removed, and the result is at most
// MaxText bytes. Every text pgrelay writes from an outside source goes
// through it, so that no such text can make the write that records it fail.
func StorableText(s string) string {
	if len(s) <= MaxText && utf8.ValidString(s) && strings.IndexByte(s, 0) < 0 {
		return s
	}
	s = strings.ToValidUTF8(s, "\uFFFD")
	s = strings.ReplaceAll(s, "\x00", "")
	if len(s) <= MaxText {
		return s
	}
	n := MaxText - len(textCut)
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + textCut
}
