package web

import (
	"context"
	"errors"
	"fmt"
	"html/template"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/pgrelay/pgrelay/events/store"
	"github.com/pgrelay/pgrelay/internal/secret"
)

// page is what every template gets.
type page struct {
	Title    string
	Nav      string // the navigation entry of the page
	ReadOnly bool
	Notice   string // what an action just did (its redirect's notice cookie)
	Data     any
}

// What a page shows of the texts that producers and handlers write
// (payloads, errors, recipients), so that no response of the console passes
// 1 MiB whatever the database holds. Escaping makes a character at most 5
// bytes (`&#34;`): the event's page, the largest, is at most 64 Ki
// characters of payload and as many of its last error (320 KiB each), 50
// history rows of 500 characters (125 KB) and 10 dead letters in short.
const (
	listChars    = 200      // a payload, error, subject or recipients in a list
	historyChars = 500      // each error or note of a history
	historyRows  = 50       // the latest rows of an event's or an email's history
	pageChars    = 64 << 10 // a payload or last error on its event's page
	detailChars  = 16 << 10 // an email's recipients, subject and error; a channel's handler
	deadOfEvent  = 10       // the dead letters an event's page lists
)

// clipped is a text cut to a page's bound.
type clipped struct {
	Text string
	Cut  bool // the text goes on
}

// clip cuts s (read with one character more than shown) to n characters.
func clip(s string, n int) clipped {
	i := 0
	for at := range s {
		if i == n {
			return clipped{Text: s[:at], Cut: true}
		}
		i++
	}
	return clipped{Text: s}
}

// pageTimeout bounds a page's statements.
const pageTimeout = 10 * time.Second

var funcs = template.FuncMap{
	"ago": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return ago(v)
		case *time.Time:
			if v == nil {
				return "-"
			}
			return ago(*v)
		}
		return fmt.Sprint(t)
	},
	"ts": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			return v.UTC().Format("2006-01-02 15:04:05.000")
		case *time.Time:
			if v == nil {
				return "-"
			}
			return v.UTC().Format("2006-01-02 15:04:05.000")
		}
		return fmt.Sprint(t)
	},
	"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339Nano) },
	"dur": func(d time.Duration) string { return d.String() },
	"durp": func(d *time.Duration) string {
		if d == nil {
			return "never"
		}
		return d.String()
	},
	"str": func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	},
	"intp": func(p *int) string {
		if p == nil {
			return "-"
		}
		return strconv.Itoa(*p)
	},
	"int64": func(i int) int64 { return int64(i) },
	// The bounds of the texts, by where they are shown.
	"cutList":    func(s string) clipped { return clip(s, listChars) },
	"cutHistory": func(s string) clipped { return clip(s, historyChars) },
	"cutPage":    func(s string) clipped { return clip(s, pageChars) },
	"cutDetail":  func(s string) clipped { return clip(s, detailChars) },
	"pageChars":  func() int { return pageChars },
	// after is how long after the history's previous row (i - 1) row i
	// came: a retry's backoff, an attempt's run.
	"after": func(h []store.LogEntry, i int) string {
		if i == 0 {
			return "-"
		}
		return "+" + h[i].At.Sub(h[i-1].At).Round(time.Millisecond).String()
	},
	// capped is a count DeadLetterCounts stopped at.
	"capped": func(n int64) string {
		if n > store.DeadCountCap {
			return "over " + strconv.Itoa(store.DeadCountCap)
		}
		return strconv.FormatInt(n, 10)
	},
	// dict passes several values to a template: dict "Key" value ...
	"dict": func(kv ...any) (map[string]any, error) {
		if len(kv)%2 != 0 {
			return nil, errors.New("dict: odd number of arguments")
		}
		m := make(map[string]any, len(kv)/2)
		for i := 0; i < len(kv); i += 2 {
			k, ok := kv[i].(string)
			if !ok {
				return nil, fmt.Errorf("dict: key %v is not a string", kv[i])
			}
			m[k] = kv[i+1]
		}
		return m, nil
	},
}

// ago is how long before now t was, to the second.
func ago(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	if d < 0 {
		return "in " + (-d).String()
	}
	return d.String() + " ago"
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, p page) {
	p.ReadOnly = s.cfg.ReadOnly
	if p.Notice == "" {
		p.Notice = s.takeNotice(w, r)
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	if err := s.pages[name].ExecuteTemplate(w, "layout.html", p); err != nil {
		s.cfg.Logger.Error("console: render page", "page", name, "err", err)
	}
}

// fail shows msg on the error page with code.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, code int, msg string) {
	s.render(w, r, code, "error", page{Title: http.StatusText(code), Data: msg})
}

// dbFail shows what a statement's err means: not found (404), a privilege
// the console's login lacks (403), else the error (500, and logged).
func (s *Server) dbFail(w http.ResponseWriter, r *http.Request, err error) {
	var pgErr *pgconn.PgError
	switch {
	case errors.Is(err, store.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "Not found: "+err.Error()+".")
	case errors.As(err, &pgErr) && pgErr.Code == "PR050":
		s.fail(w, r, http.StatusNotFound, pgErr.Message+": retried, discarded or past the retention already.")
	case errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "PR"):
		// pgrelay refused on purpose (an unregistered channel, a node
		// decommissioned): its message and hint say why and what to do.
		msg := pgErr.Message + "."
		if pgErr.Hint != "" {
			msg += " " + pgErr.Hint
		}
		s.fail(w, r, http.StatusConflict, msg)
	case errors.As(err, &pgErr) && pgErr.Code == "42501":
		s.fail(w, r, http.StatusForbidden, "The console's database login may not do this: "+pgErr.Message+
			". Reading needs pgrelay_viewer; retry and discard need pgrelay_admin (docs/dba-guide.md).")
	default:
		s.cfg.Logger.Error("console: database", "path", r.URL.Path, "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The database refused or failed: "+secret.String(err.Error()))
	}
}

// ctx is a request's context bounded by pageTimeout.
func ctx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), pageTimeout)
}

// pathID is the request's {id}, 0 and false (after a 400) when it is none.
func (s *Server) pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not an id.", r.PathValue("id")))
		return 0, false
	}
	return id, true
}

// failureWindow is how far back a channel's page looks for failures: the log
// is read backwards by id over that span, nothing older.
const failureWindow = time.Hour

// channelPage is the channel page's data.
type channelPage struct {
	Settings store.ChannelSettings
	Row      channelRow
	Listed   bool // Row is the overview's (the channel was there when it was read)
	Failures []store.LogEntry
	Dead     []store.DeadLetter
}

func (s *Server) channel(w http.ResponseWriter, r *http.Request) {
	c, cancel := ctx(r)
	defer cancel()
	name := r.PathValue("channel")
	set, err := store.Channel(c, s.cfg.DB, name, detailChars+1)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	p := channelPage{Settings: set}
	o, err := s.getOverview(c)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	p.Row, p.Listed = o.channel(name)
	if p.Failures, err = store.RecentSetbacks(c, s.cfg.DB, name, time.Now().Add(-failureWindow), 20, listChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if p.Dead, err = store.ConsoleDeadLetters(c, s.cfg.DB, store.DeadLetterFilter{Channel: name}, 20, listChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "channel", page{Title: "Channel " + name, Data: p})
}

// findEvent is the navigation's search: /events?id=N goes to N's page.
func (s *Server) findEvent(w http.ResponseWriter, r *http.Request) {
	id, err := strconv.ParseInt(r.URL.Query().Get("id"), 10, 64)
	if err != nil || id <= 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Sprintf("%q is not an event id (the number notify() returned).",
			r.URL.Query().Get("id")))
		return
	}
	http.Redirect(w, r, "/events/"+strconv.FormatInt(id, 10), http.StatusSeeOther)
}

// eventPage is the event page's data.
type eventPage struct {
	ID      int64
	Channel string
	Status  string
	History []store.LogEntry // the latest historyRows
	Rows    int64            // of HistoryRows in the log
	Queued  []store.QueuedAttempt
	Dead    []store.DeadLetter
	// Payload is the event's payload where it is kept (HasPayload): its
	// queue row, a dead letter, or event_payloads (channels that publish
	// payloads), at most pageChars of it.
	Payload    store.Payload
	HasPayload bool
	// LastError is its latest error, at most pageChars of it, shown on its
	// own when the history cuts it (HasLastError).
	LastError    store.LastError
	HasLastError bool
}

func (s *Server) event(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	p := eventPage{ID: id}
	var err error
	if p.History, p.Rows, err = store.EventHistory(c, s.cfg.DB, id, historyRows, historyChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if p.Queued, err = store.EventQueued(c, s.cfg.DB, id); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if p.Dead, err = store.DeadLettersOf(c, s.cfg.DB, id, deadOfEvent, listChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if len(p.History) == 0 && len(p.Queued) == 0 && len(p.Dead) == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("No event %d: neither the queue nor the log nor the dead "+
			"letters know it (the log keeps events for --log-retention).", id))
		return
	}
	if p.Status, err = store.EventStatus(c, s.cfg.DB, id); err != nil {
		s.dbFail(w, r, err)
		return
	}
	switch {
	case len(p.Queued) > 0:
		p.Channel = p.Queued[0].Channel
	case len(p.Dead) > 0:
		p.Channel = p.Dead[0].Channel
	default:
		p.Channel = p.History[0].Channel
	}
	if p.Payload, p.HasPayload, err = store.EventPayload(c, s.cfg.DB, id, pageChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	if p.LastError, p.HasLastError, err = store.EventLastError(c, s.cfg.DB, id, pageChars+1); err != nil {
		s.dbFail(w, r, err)
		return
	}
	// A text of at most historyChars bytes has at most as many characters:
	// the history shows it whole.
	p.HasLastError = p.HasLastError && p.LastError.Bytes > historyChars
	if p.Status == "" && len(p.Dead) > 0 {
		p.Status = "dead letter"
	}
	s.render(w, r, http.StatusOK, "event", page{Title: fmt.Sprintf("Event %d", id), Data: p})
}

// payload serves an event's whole payload as a download: its page shows
// pageChars of it.
func (s *Server) payload(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	p, kept, err := store.EventPayload(c, s.cfg.DB, id, 0)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	if !kept {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("No payload of event %d is kept: neither the queue nor "+
			"the dead letters nor event_payloads hold it.", id))
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Disposition", fmt.Sprintf(`attachment; filename="event-%d-payload.txt"`, id))
	h.Set("Content-Length", strconv.Itoa(len(p.Text)))
	h.Set("Cache-Control", "no-store")
	if _, err := io.WriteString(w, p.Text); err != nil {
		s.cfg.Logger.Debug("console: send a payload", "event", id, "err", err)
	}
}

// emailsPage lists the latest notifications.
type emailsPage struct {
	Notifications []store.NotificationRow
	Limit         int
}

func (s *Server) emails(w http.ResponseWriter, r *http.Request) {
	c, cancel := ctx(r)
	defer cancel()
	const limit = 50
	ns, err := store.RecentNotifications(c, s.cfg.DB, limit, listChars+1)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "emails", page{Title: "Emails", Nav: "emails", Data: emailsPage{Notifications: ns, Limit: limit}})
}

// emailPage is one notification and its history (the latest historyRows
// of Rows).
type emailPage struct {
	N       store.NotificationRow
	History []store.NotificationEvent
	Rows    int64
}

func (s *Server) email(w http.ResponseWriter, r *http.Request) {
	id, ok := s.pathID(w, r)
	if !ok {
		return
	}
	c, cancel := ctx(r)
	defer cancel()
	n, err := store.NotificationOf(c, s.cfg.DB, id, detailChars+1)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	h, rows, err := store.NotificationHistory(c, s.cfg.DB, id, historyRows, historyChars+1)
	if err != nil {
		s.dbFail(w, r, err)
		return
	}
	s.render(w, r, http.StatusOK, "email", page{Title: fmt.Sprintf("Email %d", id), Nav: "emails", Data: emailPage{N: n, History: h, Rows: rows}})
}
