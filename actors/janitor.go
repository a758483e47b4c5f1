package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// Messages of the janitor.
type (
	trim       struct{}
	trimResult struct {
		deleted int
		more    bool
		err     error
	}
)

// trimBatch is how many log rows one delete removes: small batches keep each
// transaction short and its locks brief on a busy log.
const trimBatch = 5000

// janitor deletes pgrelay.log rows older than LogRetention, in small batches,
// every JanitorInterval.
type janitor struct {
	d        *deps
	busy     bool
	stopTick func()
}

func janitorProps(d *deps) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &janitor{d: d} })
}

func (j *janitor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		j.stopTick = ticker(j.d, ctx.Self(), j.d.cfg.JanitorInterval, func() any { return &trim{} })
		ctx.Send(ctx.Self(), &trim{})
	case *actor.Stopping, *actor.Restarting:
		j.stopTick()
	case *trim:
		if j.busy {
			return
		}
		j.busy = true
		self := ctx.Self()
		d := j.d
		go func() {
			tctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			n, err := d.store.TrimLog(tctx, d.cfg.LogRetention, trimBatch)
			if err == nil {
				// Payloads kept for status events go with the log rows.
				_, err = d.store.TrimEventPayloads(tctx, d.cfg.LogRetention, trimBatch)
			}
			d.send(self, &trimResult{deleted: n, more: n == trimBatch, err: err})
		}()
	case *trimResult:
		j.busy = false
		if m.err != nil {
			j.d.metrics.DBErrors.WithLabelValues("trim").Inc()
			j.d.log.Error("trimming the log failed", "err", m.err)
			return
		}
		if m.deleted > 0 {
			j.d.log.Debug("trimmed log", "deleted", m.deleted)
		}
		if m.more {
			ctx.Send(ctx.Self(), &trim{})
		}
	case *actor.Stopped:
	default:
		j.d.log.Warn("janitor: unexpected message", "type", typeName(ctx.Message()))
	}
}
