package email

import (
	"context"
	"log/slog"
	"strings"
	"sync"
)

// TargetCheck is what CheckTargets found for one SMTP target.
type TargetCheck struct {
	// Target names the server without credentials: scheme://host:port.
	Target string
	// Serves lists what the target serves: "default" (every email channel
	// not mapped to a server of its own) and the channels mapped to it.
	Serves []string
	// Err is why a session could not be opened; nil when it was.
	Err error
}

// CheckTargets opens one session to each SMTP target of cfg as a send
// would, with the pool's own dialling: connect, greeting, EHLO, STARTTLS as
// the target's tls= policy says, AUTH when the URL has a user. Each is
// bounded by its target's timeout and by ctx, then ended with QUIT. The
// targets are checked at once; the results come in cfg's order (the
// default first, then the channels' by name), one per distinct URL. Nothing
// is sent. Errors name the target without its credentials.
func CheckTargets(ctx context.Context, cfg Config) ([]TargetCheck, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var (
		urls   []string
		serves = map[string][]string{}
	)
	add := func(raw, what string) {
		if _, ok := serves[raw]; !ok {
			urls = append(urls, raw)
		}
		serves[raw] = append(serves[raw], what)
	}
	if cfg.Default != "" {
		add(cfg.Default, "default")
	}
	for _, ch := range sortedKeys(cfg.Channels) {
		add(cfg.Channels[ch], ch)
	}
	out := make([]TargetCheck, len(urls))
	var wg sync.WaitGroup
	for i, raw := range urls {
		t, err := ParseTarget(raw)
		if err != nil {
			return nil, err
		}
		out[i] = TargetCheck{Target: t.String(), Serves: serves[raw]}
		p, err := newPool(t, slog.New(slog.DiscardHandler))
		if err != nil {
			return nil, err
		}
		wg.Go(func() {
			defer p.close()
			out[i].Err = p.check(ctx)
		})
	}
	wg.Wait()
	return out, nil
}

// check opens a session within the target's timeout and ctx, and ends it.
func (p *pool) check(ctx context.Context) error {
	cctx, cancel := context.WithTimeout(ctx, p.t.Timeout)
	defer cancel()
	c, err := p.dial(cctx)
	if err != nil {
		return err
	}
	c.close(p.t.Timeout)
	return nil
}

// ServesText is Serves joined with commas.
func (c TargetCheck) ServesText() string { return strings.Join(c.Serves, ",") }
