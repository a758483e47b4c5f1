package bench

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/pgrelay/pgrelay/actors"
	"github.com/pgrelay/pgrelay/events/bus"
	"github.com/pgrelay/pgrelay/internal/devenv"
)

// scenarioNATS measures what publishing status events costs dispatch: the
// same burn-down runs twice on the same database, first without NATS, then
// with the publisher on against JetStream (an in-process server with file
// storage unless --nats-url names one). It reports both dispatch figures,
// their ratio, and when the last event was acknowledged by JetStream.
func (b *bench) scenarioNATS(ctx context.Context) (*scenarioResult, error) {
	const channel = "pgrelay_bench_nats"
	res := &scenarioResult{Name: "nats"}
	n := b.o.Events
	c := b.procConfig(b.dbURL, "")
	var natsCfg actors.NATSConfig // a copy: the URL may be this scenario's server's
	if c.NATS != nil {
		natsCfg = *c.NATS
	}
	if natsCfg.Stream == "" {
		natsCfg.Stream = bus.DefaultStream
	}
	if natsCfg.URL == "" {
		srv, err := devenv.StartNATS(devenv.NATSConfig{})
		if err != nil {
			return nil, err
		}
		defer srv.Stop()
		natsCfg.URL = srv.URL()
	}
	nc, err := nats.Connect(natsCfg.URL)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return nil, fmt.Errorf("JetStream: %w", err)
	}
	defer func() {
		_ = cleanup(ctx, func(ctx context.Context) error { return unregisterChannels(ctx, b.pool, channel) })
	}()

	// run enqueues n events, then burns them down with one Processor; with
	// NATS it also waits for the last event to be in the stream.
	run := func(withNATS bool) (*measurement, time.Duration, error) {
		label, profile := "nats: without NATS", "nats-without"
		if withNATS {
			label, profile = "nats: with JetStream", "nats-with"
		}
		mark, _, err := b.preinsert(ctx, label, channel, n)
		if err != nil {
			return nil, 0, err
		}
		pc := c
		inStream := 0
		var published time.Duration
		spec := drainSpec{label: label, profile: profile, channels: []string{channel}, target: int64(n)}
		if withNATS {
			// Publish this run's events only: the earlier run's are not news.
			if _, err := b.pool.Exec(ctx, `INSERT INTO pgrelay.publish_cursors (node_id, source, last_id)
				VALUES (pgrelay._this_node(), 'log', $1)
				ON CONFLICT (node_id, source) DO UPDATE SET last_id = EXCLUDED.last_id`, mark); err != nil {
				return nil, 0, fmt.Errorf("move the publish cursor: %w", err)
			}
			inStream = benchStreamMsgs(ctx, js, natsCfg.Stream)
			spec.atTarget = func(ctx context.Context, start time.Time) error {
				for benchStreamMsgs(ctx, js, natsCfg.Stream)-inStream < n {
					select {
					case <-ctx.Done():
						return fmt.Errorf("waiting for JetStream: %w", ctx.Err())
					case <-time.After(20 * time.Millisecond):
					}
				}
				published = time.Since(start)
				return nil
			}
			pc.NATS = &natsCfg
		} else {
			pc.NATS = nil
		}
		spec.procs = []actors.Config{pc}
		d, err := b.drain(ctx, spec)
		if err != nil {
			return nil, 0, err
		}
		if err := checkLog(ctx, b.pool, mark, []string{channel}, int64(n), true); err != nil {
			return nil, 0, err
		}
		m := newMeasurement("burn-down without NATS", "pgrelay", int64(n), d.took, "events/s")
		if withNATS {
			m.Name = "burn-down with events to JetStream"
		}
		m.Series = d.series
		return m, published, nil
	}

	without, _, err := run(false)
	if err != nil {
		return res, err
	}
	res.add(without)
	with, published, err := run(true)
	if err != nil {
		return res, err
	}
	with.Detail = fmt.Sprintf("NATS %s, publish batch %d", nc.ConnectedServerVersion(), natsCfg.PublishBatch)
	res.add(with)
	last := res.add(newMeasurement("last event acknowledged by JetStream", "pgrelay", int64(n), published, "events/s"))
	last.Detail = "from the Processor's start, end to end"
	res.ratio("with/without", with.Rate, without.Rate, 0)
	return res, nil
}

// benchStreamMsgs is the number of messages in stream (0 while it is missing).
func benchStreamMsgs(ctx context.Context, js jetstream.JetStream, stream string) int {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return 0
	}
	info, err := s.Info(ctx)
	if err != nil {
		return 0
	}
	return int(info.State.Msgs)
}
