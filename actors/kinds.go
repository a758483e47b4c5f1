package actors

import (
	"slices"

	"github.com/pgrelay/pgrelay/internal/handlers"
)

// validateKinds checks Config.Kinds: each a kind the Processor can run,
// email and nats only with their servers, and no SMTP settings left
// unused.
func (c *Config) validateKinds() error {
	if c.Kinds == nil {
		return nil
	}
	for _, k := range c.Kinds {
		switch _, custom := c.Handlers[k]; {
		case k == "email" && !c.emailConfig().Enabled():
			return refuse("kinds", "has email but no SMTP server is set (SMTPURL or SMTPChannels)")
		case k == "nats" && !c.natsOn():
			return refuse("kinds", "has nats but no NATS server is set (NATS.URL)")
		case k == "go":
			return refuse("kinds", "has go: go channels run with the Go handlers, not a kind to list")
		case k != "sql" && k != "email" && k != "nats" && !custom:
			return refuse("kinds", "%q: unknown kind (expected sql, email or nats)", k)
		}
	}
	if c.emailConfig().Enabled() && !slices.Contains(c.Kinds, "email") {
		return refuse("kinds", "has no email, but an SMTP server is set: add email, or leave SMTP unset")
	}
	return nil
}

// limitKinds removes from reg the kinds Config.Kinds does not list (when it
// lists any): a Processor embedded in a program runs only what it is given.
func (c *Config) limitKinds(reg handlers.Registry) {
	if c.Kinds == nil {
		return
	}
	for k := range reg {
		if !slices.Contains(c.Kinds, k) {
			delete(reg, k)
		}
	}
}
