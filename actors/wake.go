package actors

import (
	"context"
	"sync"
	"time"
)

// A wake-up (pg_notify from pgrelay._wake) names its channel by a digest of
// the channel and this node's secret key (pgrelay._wake_hint), so that a
// login that LISTENs learns nothing of channels. The digest is computed in
// the database only: the claimer asks it for the channels it hands the
// dispatcher (once each, kept here), and the dispatcher finds a wake-up's
// channel by it.

// wakeHints keeps the hints the database gave, by channel.
type wakeHints struct {
	mu        sync.Mutex
	byChannel map[string]string
}

// of returns the hints of channels, asking the database for those not kept
// yet. A failure to ask leaves them without a hint (their wake-ups then wake
// the claimer, as an unknown one does) and is returned for the caller to
// report.
func (h *wakeHints) of(ctx context.Context, d *deps, channels []string) (map[string]string, error) {
	h.mu.Lock()
	out := make(map[string]string, len(channels))
	var ask []string
	for _, ch := range channels {
		if hint, ok := h.byChannel[ch]; ok {
			out[ch] = hint
		} else if _, asked := out[ch]; !asked {
			out[ch] = ""
			ask = append(ask, ch)
		}
	}
	h.mu.Unlock()
	if len(ask) == 0 {
		return out, nil
	}
	qctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	got, err := d.store.WakeHints(qctx, ask)
	if err != nil {
		return out, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.byChannel == nil {
		h.byChannel = map[string]string{}
	}
	for ch, hint := range got {
		h.byChannel[ch] = hint
		out[ch] = hint
	}
	return out, nil
}
