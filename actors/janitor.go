package actors

import (
	"context"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/pgrelay/pgrelay/events/store"
)

// Messages of the janitor.
type (
	trim       struct{}
	trimResult struct {
		trimmed store.Trimmed
		err     error
		// dead: dead letters deleted; deadErr: trimming them failed.
		dead    int
		deadErr error
		// cancelErr: applying the cancel requests failed.
		cancelErr error
	}
)

// trimBatch is how many log rows one delete removes: small batches keep each
// transaction short and its locks brief on a busy log.
const trimBatch = 5000

// janitor deletes pgrelay.log rows older than LogRetention, in small batches,
// every JanitorInterval. It keeps the rows that the NATS publisher of their
// node has not published yet, up to LogRetentionUnpublished; past that it
// deletes them all the same and says so loudly (an error log with the count
// and the ids, a counter; the database records them in pgrelay.log_dropped).
// It deletes the dead letters that ended more than DeadLetterRetention ago
// the same way, whether trimming the log failed or not, and applies the
// cancel requests whose event is pending here again (store.SweepCancels).
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
			t, err := d.store.TrimLog(tctx, d.cfg.LogRetention, d.cfg.LogRetentionUnpublished, trimBatch)
			if err == nil {
				// Payloads kept for status events go with the log rows.
				_, err = d.store.TrimEventPayloads(tctx, d.cfg.LogRetention, d.cfg.LogRetentionUnpublished, trimBatch)
			}
			if err == nil {
				// So do the producers' trace contexts.
				_, err = d.store.TrimEventTraces(tctx, d.cfg.LogRetention, trimBatch)
			}
			dead, deadErr := d.store.TrimDeadLetters(tctx, d.cfg.DeadLetterRetention, trimBatch)
			_, cancelErr := d.store.SweepCancels(tctx)
			d.send(self, &trimResult{trimmed: t, err: err, dead: dead, deadErr: deadErr, cancelErr: cancelErr})
		}()
	case *trimResult:
		j.busy = false
		t := m.trimmed
		if t.Dropped > 0 {
			// Reported even when trimming the payloads failed: these rows
			// are gone.
			j.d.metrics.LogUnpublishedDropped.Add(float64(t.Dropped))
			j.d.log.Error("deleted log rows that were never published on NATS: older than --log-retention-unpublished; "+
				"their status events are lost (recorded in pgrelay.log_dropped)",
				"rows", t.Dropped, "first_id", t.DroppedFirst, "last_id", t.DroppedLast,
				"log_retention_unpublished", j.d.cfg.LogRetentionUnpublished)
		}
		if m.deadErr != nil {
			j.d.metrics.DBErrors.WithLabelValues("trim").Inc()
			j.d.log.Error("trimming the dead letters failed", "err", m.deadErr)
		} else if m.dead > 0 {
			j.d.log.Debug("trimmed dead letters", "deleted", m.dead,
				"dead_letter_retention", j.d.cfg.DeadLetterRetention)
		}
		if m.cancelErr != nil {
			j.d.metrics.DBErrors.WithLabelValues("trim").Inc()
			j.d.log.Error("applying the cancel requests failed", "err", m.cancelErr)
		}
		if m.err != nil {
			j.d.metrics.DBErrors.WithLabelValues("trim").Inc()
			j.d.log.Error("trimming the log failed", "err", m.err)
			return
		}
		if t.Deleted > 0 {
			j.d.log.Debug("trimmed log", "deleted", t.Deleted)
		}
		if t.Deleted == trimBatch || (m.deadErr == nil && m.dead == trimBatch) {
			ctx.Send(ctx.Self(), &trim{})
		}
	case *actor.Stopped:
	default:
		j.d.log.Warn("janitor: unexpected message", "type", typeName(ctx.Message()))
	}
}
