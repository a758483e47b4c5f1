package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay/events"
)

// JetStreamEnabled reports whether the server (and account) has JetStream.
func (c *Conn) JetStreamEnabled(ctx context.Context) (bool, error) {
	if !c.nc.IsConnected() {
		return false, ErrNotConnected
	}
	actx, cancel := c.apiContext(ctx)
	defer cancel()
	_, err := c.js.AccountInfo(actx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount):
		return false, nil
	}
	return false, fmt.Errorf("bus: ask for JetStream: %w", err)
}

// StreamConfig is what pgrelay asks of the events stream.
type StreamConfig struct {
	// Name of the stream (default DefaultStream).
	Name string
	// MaxAge: messages older than this are removed. 0 when creating means
	// DefaultMaxAge; 0 for an existing stream leaves its max age as it is.
	MaxAge time.Duration
	// Retention is RetentionLimits or RetentionInterest. "" when creating
	// means limits; "" for an existing stream leaves its policy as it is.
	Retention string
	// MaxBytes: the oldest messages are removed to keep the stream within
	// this size. 0 when creating means no limit; 0 for an existing stream
	// leaves its limit as it is.
	MaxBytes int64
	// Replicas is how many servers of a NATS cluster keep a copy of the
	// stream (1..MaxReplicas). 0 when creating means 1; 0 for an existing
	// stream leaves its replicas as they are. A number that differs from
	// an existing stream's is applied: the servers add or drop copies in
	// place, keeping the messages.
	Replicas int
}

// MaxReplicas is the most replicas JetStream gives a stream.
const MaxReplicas = 5

// Retention policies of the events stream. Work-queue retention is not
// offered: it allows one consumer per subject and removes a message once it
// is acknowledged, while events are for any number of consumers.
const (
	// RetentionLimits keeps messages until max age or max bytes removes them.
	RetentionLimits = "limits"
	// RetentionInterest removes a message once every consumer that existed
	// when it was stored has acknowledged it (at once when there is none).
	RetentionInterest = "interest"
)

// retentionPolicy maps a Retention name to JetStream's policy.
func retentionPolicy(name string) (jetstream.RetentionPolicy, error) {
	switch name {
	case "", RetentionLimits:
		return jetstream.LimitsPolicy, nil
	case RetentionInterest:
		return jetstream.InterestPolicy, nil
	}
	return 0, fmt.Errorf("bus: stream retention %q: expected %s or %s", name, RetentionLimits, RetentionInterest)
}

// Defaults of the events stream.
const (
	DefaultStream = "PGRELAY_EVENTS"
	DefaultMaxAge = 7 * 24 * time.Hour
	// DuplicateWindow is the stream's de-duplication window: a message
	// published again with the same Nats-Msg-Id within it is dropped. It
	// covers replays after a short outage or a restart (the publisher
	// republishes what it could not see acknowledged; after a longer outage
	// it reads the stream for them first: StoredIDs).
	DuplicateWindow = 2 * time.Minute
)

// EnsureStream creates the events stream, or reconciles an existing one:
// subjects pgrelay.> are added when the stream does not capture them (its
// narrower pgrelay.* subjects are replaced) and MaxAge, Retention, MaxBytes
// and Replicas are applied when set; everything else (storage, placement,
// limits) is left as the operator set it. A stream pgrelay cannot publish
// to (sealed, a mirror, no acks) or a change the server refuses (another
// stream captures pgrelay.>, more replicas than the cluster has servers) is
// an ErrStreamConfig error saying what to fix. It returns what it did:
// "created", "updated" or "ok".
func (c *Conn) EnsureStream(ctx context.Context, cfg StreamConfig) (string, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultStream
	}
	retention, err := retentionPolicy(cfg.Retention)
	if err != nil {
		return "", err
	}
	if cfg.MaxBytes < 0 {
		return "", fmt.Errorf("bus: stream max bytes %d must not be negative", cfg.MaxBytes)
	}
	if cfg.Replicas < 0 || cfg.Replicas > MaxReplicas {
		return "", fmt.Errorf("bus: stream replicas %d: expected 1..%d", cfg.Replicas, MaxReplicas)
	}
	actx, cancel := c.apiContext(ctx)
	s, err := c.js.Stream(actx, cfg.Name)
	cancel()
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		age := cfg.MaxAge
		if age <= 0 {
			age = DefaultMaxAge
		}
		maxBytes := cfg.MaxBytes
		if maxBytes == 0 {
			maxBytes = -1 // no limit
		}
		replicas := max(cfg.Replicas, 1)
		actx, cancel := c.apiContext(ctx)
		defer cancel()
		_, err = c.js.CreateStream(actx, jetstream.StreamConfig{
			Name:        cfg.Name,
			Description: "pgrelay status events (docs/events.md)",
			Subjects:    []string{events.StreamSubjects},
			Retention:   retention,
			Storage:     jetstream.FileStorage,
			MaxAge:      age,
			MaxBytes:    maxBytes,
			Duplicates:  min(DuplicateWindow, age),
			Replicas:    replicas,
		})
		if err != nil {
			var apiErr *jetstream.APIError
			if errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamNameInUse {
				return "", err // created concurrently: try again
			}
			return "", fmt.Errorf("%w: create stream %s with subjects %s, replicas %d: %w%s", ErrStreamConfig, cfg.Name,
				events.StreamSubjects, replicas, err, replicasHint(replicas))
		}
		return "created", nil
	}
	if err != nil {
		return "", fmt.Errorf("bus: look up stream %s: %w", cfg.Name, err)
	}
	conf := s.CachedInfo().Config
	switch {
	case conf.Sealed:
		return "", fmt.Errorf("%w: stream %s is sealed (it accepts no messages): delete it or set another --nats-stream", ErrStreamConfig, cfg.Name)
	case conf.Mirror != nil:
		return "", fmt.Errorf("%w: stream %s is a mirror (it accepts no published messages): delete it or set another --nats-stream", ErrStreamConfig, cfg.Name)
	case conf.NoAck:
		return "", fmt.Errorf("%w: stream %s has no_ack set; pgrelay needs acknowledged publishes: clear it or set another --nats-stream", ErrStreamConfig, cfg.Name)
	}
	changed := false
	if !slicesContainsAny(conf.Subjects, events.StreamSubjects, ">") {
		keep := conf.Subjects[:0:0]
		for _, sub := range conf.Subjects {
			if !strings.HasPrefix(sub, events.SubjectRoot+".") {
				keep = append(keep, sub)
			}
		}
		conf.Subjects = append(keep, events.StreamSubjects)
		changed = true
	}
	if cfg.MaxAge > 0 && conf.MaxAge != cfg.MaxAge {
		conf.MaxAge = cfg.MaxAge
		if conf.Duplicates > cfg.MaxAge {
			conf.Duplicates = cfg.MaxAge
		}
		changed = true
	}
	if cfg.Retention != "" && conf.Retention != retention {
		if conf.Retention == jetstream.WorkQueuePolicy {
			return "", fmt.Errorf("%w: stream %s has work-queue retention, which the server cannot change and "+
				"which allows one consumer per subject: delete it or set another --nats-stream", ErrStreamConfig, cfg.Name)
		}
		conf.Retention = retention
		changed = true
	}
	if cfg.MaxBytes > 0 && conf.MaxBytes != cfg.MaxBytes {
		conf.MaxBytes = cfg.MaxBytes
		changed = true
	}
	hint := ""
	if cfg.Replicas > 0 && conf.Replicas != cfg.Replicas {
		conf.Replicas = cfg.Replicas
		hint = replicasHint(cfg.Replicas)
		changed = true
	}
	if !changed {
		return "ok", nil
	}
	actx, cancel = c.apiContext(ctx)
	defer cancel()
	if _, err := c.js.UpdateStream(actx, conf); err != nil {
		return "", fmt.Errorf("%w: update stream %s (subjects %v, max age %s, retention %s, max bytes %d, replicas %d): %w%s",
			ErrStreamConfig, cfg.Name, conf.Subjects, conf.MaxAge, conf.Retention, conf.MaxBytes, conf.Replicas, err, hint)
	}
	return "updated", nil
}

// replicasHint is what the error of a stream asked for n replicas adds:
// more than one take a cluster.
func replicasHint(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" (%d replicas take a NATS cluster of at least %d servers with JetStream)", n, n)
}

func slicesContainsAny(s []string, vs ...string) bool {
	for _, x := range s {
		for _, v := range vs {
			if x == v {
				return true
			}
		}
	}
	return false
}

// StreamState is what the publisher reads of its stream.
type StreamState struct {
	// LastSeq is the sequence of the stream's last message.
	LastSeq uint64
	// Duplicates is the stream's duplicate window.
	Duplicates time.Duration
	// Created is when the stream was created: a stream deleted and created
	// again under the same name has another.
	Created time.Time
}

// StreamState reads the state of stream from the server.
func (c *Conn) StreamState(ctx context.Context, stream string) (StreamState, error) {
	if !c.nc.IsConnected() {
		return StreamState{}, ErrNotConnected
	}
	actx, cancel := c.apiContext(ctx)
	defer cancel()
	s, err := c.js.Stream(actx, stream)
	if err != nil {
		return StreamState{}, fmt.Errorf("bus: look up stream %s: %w", stream, c.wrap(err, ""))
	}
	info := s.CachedInfo()
	return StreamState{LastSeq: info.State.LastSeq, Duplicates: info.Config.Duplicates, Created: info.Created}, nil
}
