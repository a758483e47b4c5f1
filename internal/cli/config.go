package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/pgrelay/pgrelay/internal/secret"
)

// fileConfig is the --config file: JSON, documented in docs/notifier.md.
//
//	{
//	  "smtp": {
//	    "default": "smtp://user:pass@mail.example.com:587",
//	    "channels": {"alerts": "smtps://user:pass@alerts.example.com"},
//	    "message_id_domain": "example.com"
//	  }
//	}
//
// Flags given on the command line (or as PGRELAY_ variables) win over the
// file: --smtp-url replaces smtp.default.
type fileConfig struct {
	SMTP *smtpFileConfig `json:"smtp"`
}

type smtpFileConfig struct {
	// Default is the SMTP URL of email channels not listed in Channels.
	Default string `json:"default"`
	// Channels maps an email channel to its own SMTP URL.
	Channels map[string]string `json:"channels"`
	// MessageIDDomain is the right-hand side of Message-IDs (default "pgrelay").
	MessageIDDomain string `json:"message_id_domain"`
}

// loadConfigFile reads and checks the --config file. Its errors never quote
// the file's values (they hold credentials): JSON errors name a position or
// a field.
func loadConfigFile(path string) (*fileConfig, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("--config %s: no such file", path)
		}
		return nil, fmt.Errorf("--config %s: %w", path, err)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var c fileConfig
	if err := dec.Decode(&c); err != nil {
		var syn *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syn):
			return nil, fmt.Errorf("--config %s: not valid JSON at byte %d", path, syn.Offset)
		case errors.As(err, &typ):
			return nil, fmt.Errorf("--config %s: %s must be a %s", path, typ.Field, typ.Type)
		}
		return nil, fmt.Errorf("--config %s: %w", path, err) // unknown field: names the field only
	}
	if dec.More() {
		return nil, fmt.Errorf("--config %s: more than one JSON value", path)
	}
	return &c, nil
}

// holdsCredentials tells whether the file's SMTP URLs carry a user or a
// password.
func (c *fileConfig) holdsCredentials() bool {
	if c == nil || c.SMTP == nil {
		return false
	}
	urls := []string{c.SMTP.Default}
	for _, u := range c.SMTP.Channels {
		urls = append(urls, u)
	}
	for _, u := range urls {
		if secret.String(u) != u {
			return true
		}
	}
	return false
}
