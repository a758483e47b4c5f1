package web

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"strings"
	"time"
)

// NoticeCookie is the cookie that carries an action's notice to the page
// its redirect shows: the notice is the console's own text, never one a
// link can set (a ?done= would let any site put its words on the console).
const NoticeCookie = "pgrelay_notice"

// noticeLife is how long a notice waits for its page: the redirect follows
// at once.
const noticeLife = time.Minute

// notices signs the notices this console wrote, with a key of its own
// drawn at start, so that a cookie written by anyone else (another service
// on localhost shares its cookies) shows nothing.
type notices struct{ key []byte }

func newNotices() notices {
	key := make([]byte, 32)
	_, _ = rand.Read(key) // crypto/rand.Read never fails (Go 1.24)
	return notices{key: key}
}

func (n notices) sign(msg string) string {
	m := hmac.New(sha256.New, n.key)
	m.Write([]byte(msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// setNotice has the next page that the browser shows say msg.
func (s *Server) setNotice(w http.ResponseWriter, msg string) {
	http.SetCookie(w, &http.Cookie{Name: NoticeCookie,
		Value: base64.RawURLEncoding.EncodeToString([]byte(msg)) + "." + s.notices.sign(msg),
		Path:  "/", MaxAge: int(noticeLife / time.Second), HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

// takeNotice returns the notice r carries ("" for none, or one this console
// did not sign) and clears it, so that it shows once.
func (s *Server) takeNotice(w http.ResponseWriter, r *http.Request) string {
	c, err := r.Cookie(NoticeCookie)
	if err != nil {
		return ""
	}
	http.SetCookie(w, &http.Cookie{Name: NoticeCookie, Path: "/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode})
	enc, sig, ok := strings.Cut(c.Value, ".")
	if !ok {
		return ""
	}
	msg, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !hmac.Equal([]byte(sig), []byte(s.notices.sign(string(msg)))) {
		return ""
	}
	return string(msg)
}
