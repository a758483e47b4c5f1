// Package secret hides credentials in the text pgrelay prints and logs: the
// one redactor for URLs (PostgreSQL, SMTP, NATS) and for messages that may
// quote one, such as a parser's error. String masks what it finds in any
// text; URL names one URL by what is safe to show of it.
package secret

import (
	"net/url"
	"regexp"
	"strings"
)

// Mask replaces what is hidden.
const Mask = "xxxxx"

var (
	// scheme is the start of a URL: scheme://
	scheme = regexp.MustCompile(`(?i)[a-z][a-z0-9+.\-]*://`)
	// keyValue finds key=value credentials: libpq keyword DSNs and URL query
	// parameters (password=..., sslpassword=..., token=..., pass=...),
	// quoted or not.
	keyValue = regexp.MustCompile(`(?i)\b(password|sslpassword|passwd|pass|token|secret)=('(?:[^'\\]|\\.)*'|[^&\s"']*)`)
)

// String returns s with every credential it recognises replaced by Mask:
// the userinfo of URLs (user and password: a NATS token is a user), and
// password-like key=value pairs.
//
// A URL's userinfo is everything from its "://" to the last '@' before the
// next quote, angle bracket, line end or URL (a comma-separated list).
// Neither spaces nor slashes end it, so a password that makes the URL
// unparsable ("pa ss", "p/w") is hidden whole; the price is that text after
// a URL may be hidden with it when an '@' follows on the same line.
func String(s string) string {
	var b strings.Builder
	rest := s
	for {
		loc := scheme.FindStringIndex(rest)
		if loc == nil {
			b.WriteString(rest)
			break
		}
		b.WriteString(rest[:loc[1]])
		rest = rest[loc[1]:]
		end := strings.IndexAny(rest, "\"'<>\n")
		if end < 0 {
			end = len(rest)
		}
		if next := scheme.FindStringIndex(rest[:end]); next != nil {
			end = next[0]
		}
		if at := strings.LastIndexByte(rest[:end], '@'); at >= 0 {
			b.WriteString(Mask)
			rest = rest[at:]
		}
	}
	return keyValue.ReplaceAllString(b.String(), "${1}="+Mask)
}

// Unparsable is what URL shows for a string that does not parse as a URL.
const Unparsable = "(unparseable URL, not shown)"

// URL returns raw as scheme://host:port/path, without its userinfo, query
// and fragment, where options such as a password may be; a string that does
// not parse as a URL with a scheme is not shown at all (Unparsable), since
// the parser would have had to guess where its credentials end.
func URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Opaque != "" {
		return Unparsable
	}
	u.User = nil
	u.RawQuery = ""
	u.ForceQuery = false
	u.Fragment = ""
	u.RawFragment = ""
	return u.String()
}
