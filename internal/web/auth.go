package web

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"

	"golang.org/x/crypto/bcrypt"
)

// MinTokenLength is the shortest token --web-auth takes: a console reachable
// from the network must not open to a guess.
const MinTokenLength = 16

// Auth is the console's --web-auth: a token, or users with bcrypt password
// hashes (a basic-auth file, as `htpasswd -B` writes).
type Auth struct {
	token string
	users map[string][]byte // user -> bcrypt hash

	// verified remembers the credentials bcrypt accepted (their SHA-256,
	// never the password): bcrypt costs tens of milliseconds, and the
	// overview asks every second.
	mu       sync.Mutex
	verified map[[32]byte]bool
}

// maxVerified bounds Auth.verified.
const maxVerified = 64

// ParseAuth reads --web-auth: "token:SECRET" (sent as the password of HTTP
// basic authentication, any user name, or as "Authorization: Bearer
// SECRET") or "basic:FILE" (lines "user:bcrypt-hash"; blank lines and lines
// starting with # are skipped). Its errors never quote the secret.
func ParseAuth(spec string) (*Auth, error) {
	kind, v, ok := strings.Cut(spec, ":")
	switch {
	case ok && kind == "token":
		if len(v) < MinTokenLength {
			return nil, fmt.Errorf("--web-auth token: at least %d characters (e.g. openssl rand -hex 24)", MinTokenLength)
		}
		return &Auth{token: v}, nil
	case ok && kind == "basic":
		return readBasicFile(v)
	}
	return nil, errors.New("--web-auth: expected token:SECRET or basic:FILE (a basic-auth file of user:bcrypt-hash lines)")
}

func readBasicFile(path string) (*Auth, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("--web-auth basic: %w", err)
	}
	a := &Auth{users: map[string][]byte{}}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		if !ok || user == "" {
			return nil, fmt.Errorf("--web-auth basic %s, line %d: expected user:bcrypt-hash", path, n)
		}
		if _, err := bcrypt.Cost([]byte(hash)); err != nil {
			return nil, fmt.Errorf("--web-auth basic %s, line %d (user %q): the password is not a bcrypt hash "+
				"(htpasswd -B writes one)", path, n, user)
		}
		a.users[user] = []byte(hash)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("--web-auth basic %s: %w", path, err)
	}
	if len(a.users) == 0 {
		return nil, fmt.Errorf("--web-auth basic %s: no user in the file", path)
	}
	return a, nil
}

// allows reports whether r carries the token or a user's password.
func (a *Auth) allows(r *http.Request) bool {
	if a.token != "" {
		if t, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
			return subtle.ConstantTimeCompare([]byte(t), []byte(a.token)) == 1
		}
		_, pw, ok := r.BasicAuth()
		return ok && subtle.ConstantTimeCompare([]byte(pw), []byte(a.token)) == 1
	}
	user, pw, ok := r.BasicAuth()
	if !ok {
		return false
	}
	hash, known := a.users[user]
	if !known {
		return false
	}
	key := sha256.Sum256([]byte(user + "\x00" + pw + "\x00" + string(hash)))
	a.mu.Lock()
	seen := a.verified[key]
	a.mu.Unlock()
	if seen {
		return true
	}
	if bcrypt.CompareHashAndPassword(hash, []byte(pw)) != nil {
		return false
	}
	a.mu.Lock()
	if a.verified == nil || len(a.verified) >= maxVerified {
		a.verified = map[[32]byte]bool{}
	}
	a.verified[key] = true
	a.mu.Unlock()
	return true
}

// wrap asks every request for a's credentials (a nil: none).
func (a *Auth) wrap(h http.Handler) http.Handler {
	if a == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !a.allows(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="pgrelay console", charset="UTF-8"`)
			http.Error(w, "pgrelay console: authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}
