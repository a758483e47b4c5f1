package web

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/pgrelay/pgrelay/events/store"
)

// deadListed is how many dead letters the page lists.
const deadListed = 100

// deadPage is the dead-letter page's data.
type deadPage struct {
	Channel  string
	Since    string // as given (UTC)
	Count    int64
	Letters  []store.DeadLetter
	Listed   int
	Channels []string
	Back     string // this page, where its actions come back to
}

// sinceLayouts are the forms of the since filter: an HTML datetime-local
// field's (read as UTC), and RFC 3339.
var sinceLayouts = []string{"2006-01-02T15:04", "2006-01-02T15:04:05", time.RFC3339Nano}

// deadFilter reads the channel and since of a query or a form.
func deadFilter(v url.Values) (store.DeadLetterFilter, error) {
	f := store.DeadLetterFilter{Channel: strings.TrimSpace(v.Get("channel"))}
	since := strings.TrimSpace(v.Get("since"))
	if since == "" {
		return f, nil
	}
	for _, l := range sinceLayouts {
		if t, err := time.ParseInLocation(l, since, time.UTC); err == nil {
			f.Since = t
			return f, nil
		}
	}
	return f, fmt.Errorf("since %q: expected a time such as 2026-12-01T10:00 (UTC) or RFC 3339", since)
}

// filterQuery is f as the dead-letter page's query string.
func filterQuery(f store.DeadLetterFilter) string {
	v := url.Values{}
	if f.Channel != "" {
		v.Set("channel", f.Channel)
	}
	if !f.Since.IsZero() {
		v.Set("since", f.Since.UTC().Format("2006-01-02T15:04:05"))
	}
	return v.Encode()
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	f, err := deadFilter(r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	p := deadPage{Channel: f.Channel, Listed: deadListed, Back: "/dead?" + filterQuery(f)}
	if !f.Since.IsZero() {
		p.Since = f.Since.UTC().Format("2006-01-02T15:04:05")
	}
	if p.Count, err = store.CountDeadLetters(c, s.cfg.DB, f); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if p.Letters, err = store.ConsoleDeadLetters(c, s.cfg.DB, f, deadListed, listChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if p.Channels, err = store.ChannelNames(c, s.cfg.DB); err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "dead", page{Title: "Dead letters", Nav: "dead", Data: p})
}

// action serves a POST that changes something: refused when read-only.
func (s *Server) action(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.ReadOnly {
			s.fail(w, r, http.StatusForbidden, "This console is read-only (--web-read-only): it retries and discards nothing.")
			return
		}
		r.Body = http.MaxBytesReader(w, r.Body, 1<<16)
		if err := r.ParseForm(); err != nil {
			s.fail(w, r, http.StatusBadRequest, "Unreadable form: "+err.Error())
			return
		}
		h(w, r)
	}
}

// back redirects to the form's back (a path of the console), else the
// dead-letter page, where the notice says what was done.
func (s *Server) back(w http.ResponseWriter, r *http.Request, done string) {
	to := r.PostForm.Get("back")
	if !strings.HasPrefix(to, "/") || strings.HasPrefix(to, "//") || strings.Contains(to, "\\") {
		to = "/dead"
	}
	u, err := url.Parse(to)
	if err != nil {
		u = &url.URL{Path: "/dead"}
	}
	s.setNotice(w, done)
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

func (s *Server) retry(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	n, err := store.RetryDeadLetter(c, s.cfg.DB, id)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.cfg.Logger.Info("console: dead letter retried", "dead_letter", id, "queue_id", n)
	s.back(w, r, fmt.Sprintf("Dead letter %d queued again as %d.", id, n))
}

func (s *Server) discard(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	if err := store.DiscardDeadLetter(c, s.cfg.DB, id); err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.cfg.Logger.Info("console: dead letter discarded", "dead_letter", id)
	s.back(w, r, fmt.Sprintf("Dead letter %d discarded.", id))
}

// confirmPage asks to confirm a bulk retry of Count dead letters.
type confirmPage struct {
	Channel, Since string
	Count          int64
	Changed        bool // the count differs from the one confirmed
	Query          string
}

// retryAll retries the dead letters of a filter, once confirmed with their
// count: a first POST (no confirm) shows the count; a POST confirming a count
// that no longer holds shows the new one instead of retrying.
func (s *Server) retryAll(w http.ResponseWriter, r *http.Request) {
	f, err := deadFilter(r.PostForm)
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	if f.Channel == "" {
		s.fail(w, r, http.StatusBadRequest, "Retrying dead letters in bulk takes a channel: choose one in the filter.")
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	n, err := store.CountDeadLetters(c, s.cfg.DB, f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	p := confirmPage{Channel: f.Channel, Count: n, Query: filterQuery(f)}
	if !f.Since.IsZero() {
		p.Since = f.Since.UTC().Format("2006-01-02T15:04:05")
	}
	confirm := r.PostForm.Get("confirm")
	if confirm == "" || confirm != strconv.FormatInt(n, 10) {
		p.Changed = confirm != ""
		code := http.StatusOK
		if p.Changed {
			code = http.StatusConflict
		}
		s.render(w, r, code, "confirm", page{Title: "Retry dead letters", Nav: "dead", Data: p})
		return
	}
	done, err := store.RetryAllDeadLetters(c, s.cfg.DB, f)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.cfg.Logger.Info("console: dead letters retried", "channel", f.Channel, "since", p.Since, "retried", done)
	r.PostForm.Set("back", "/dead?"+p.Query)
	s.back(w, r, fmt.Sprintf("%d dead letters queued again.", done))
}
