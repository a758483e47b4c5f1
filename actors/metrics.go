package actors

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/events"
)

// Metrics are the Processor's Prometheus collectors. Each Processor has its
// own set, registered on the Registerer given in its Config.
type Metrics struct {
	Claimed         *prometheus.CounterVec
	Succeeded       *prometheus.CounterVec
	Failed          *prometheus.CounterVec
	GaveUp          *prometheus.CounterVec
	Expired         *prometheus.CounterVec
	Released        prometheus.Counter
	Rescued         prometheus.Counter
	InFlight        prometheus.Gauge
	BatchSlotsInUse prometheus.Gauge
	ClaimLatency    prometheus.Histogram
	HandlerDuration *prometheus.HistogramVec
	CompleteLatency prometheus.Histogram
	PendingOutcomes prometheus.Gauge
	DBErrors        *prometheus.CounterVec
	ChannelActors   prometheus.Gauge
	// LogUnpublishedDropped counts log rows that retention deleted before
	// the NATS publisher of their node had published them.
	LogUnpublishedDropped prometheus.Counter
	// Events are the collectors of status events on NATS.
	Events *EventMetrics
}

// dbErrorOps are the operations pgrelay_db_errors_total counts: each starts
// at zero.
func dbErrorOps() []string {
	return []string{"batch", "claim", "complete", "heartbeat", "rescue", "lease", "trim", "queue_stats", "schedule"}
}

// initChannel makes the per-channel counters exist, at zero, for channel.
func (m *Metrics) initChannel(channel string) {
	for _, v := range []*prometheus.CounterVec{m.Claimed, m.Succeeded, m.Failed, m.GaveUp, m.Expired} {
		v.WithLabelValues(channel)
	}
}

// outcome counts one outcome of an event of channel: k as pgrelay.log records
// it (a failure once written: whether it gave up is the completion's answer),
// events.Release for a claim given back unrun. Every path that ends an event
// counts its outcome here.
func (m *Metrics) outcome(channel string, k events.Kind) { m.outcomeN(channel, k, 1) }

// outcomeN counts n outcomes k of channel's events.
func (m *Metrics) outcomeN(channel string, k events.Kind, n int) {
	f := float64(n)
	switch k {
	case events.Succeeded:
		m.Succeeded.WithLabelValues(channel).Add(f)
	case events.Failed:
		m.Failed.WithLabelValues(channel).Add(f)
	case events.GaveUp:
		m.GaveUp.WithLabelValues(channel).Add(f)
	case events.Expired:
		m.Expired.WithLabelValues(channel).Add(f)
	case events.Release:
		m.Released.Add(f)
	}
}

// NewMetrics creates the collectors and registers them on reg (when not nil),
// but for Events: a Processor registers those only when it has NATS (an
// idle pgrelay_nats_connected 0 would look like an outage).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		Claimed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "claimed_total", Help: "Events claimed, by channel.",
		}, []string{"channel"}),
		Succeeded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "succeeded_total", Help: "Events whose handler succeeded, by channel.",
		}, []string{"channel"}),
		Failed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "failed_total", Help: "Failed attempts that will be retried, by channel.",
		}, []string{"channel"}),
		GaveUp: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "gave_up_total", Help: "Events given up after their last attempt, by channel.",
		}, []string{"channel"}),
		Expired: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "expired_total", Help: "Events past their expiry when dispatched, by channel.",
		}, []string{"channel"}),
		Released: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "released_total", Help: "Claims given back unrun (shutdown, lost database connection).",
		}),
		Rescued: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "rescued_total", Help: "Claims of dead or stuck Processors taken back by this one.",
		}),
		InFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "processor_slots_in_use", Help: "This Processor's slots in use (of --concurrency): events claimed by this Processor and not yet finished.",
		}),
		BatchSlotsInUse: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "processor_batch_slots_in_use", Help: "This Processor's batch slots in use (of --sql-batch-concurrency): the events its running sql batches (direct, lane and HandleTx) may take, one slot each, held until the batch commits.",
		}),
		ClaimLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "pgrelay", Name: "claim_duration_seconds", Help: "Time a claim query takes.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		HandlerDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "pgrelay", Name: "handler_duration_seconds", Help: "Time a handler takes, by channel.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 18),
		}, []string{"channel"}),
		CompleteLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "pgrelay", Name: "complete_duration_seconds", Help: "Time a batched completion takes.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14),
		}),
		PendingOutcomes: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "pending_outcomes", Help: "Outcomes waiting to be written to the log.",
		}),
		ChannelActors: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "channel_actors", Help: "Channel and lane actors alive (idle ones are stopped).",
		}),
		DBErrors: NewDBErrors(dbErrorOps()...),
		LogUnpublishedDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "log_unpublished_dropped_total",
			Help: "Log rows this Processor's janitor deleted before the NATS publisher of their node had published them (older than --log-retention-unpublished); recorded in pgrelay.log_dropped.",
		}),
		Events: newEventMetrics(),
	}
	if reg != nil {
		for _, c := range []prometheus.Collector{m.Claimed, m.Succeeded, m.Failed, m.GaveUp, m.Expired,
			m.Released, m.Rescued, m.InFlight, m.BatchSlotsInUse, m.ClaimLatency, m.HandlerDuration, m.CompleteLatency,
			m.PendingOutcomes, m.DBErrors, m.ChannelActors, m.LogUnpublishedDropped} {
			if err := reg.Register(c); err != nil {
				return nil, err
			}
		}
	}
	return m, nil
}

// EventMetrics are the collectors of status events on NATS and of the nats
// handler kind.
type EventMetrics struct {
	Published       *prometheus.CounterVec
	PublishErrors   prometheus.Counter
	Backlog         *prometheus.GaugeVec
	Lag             *prometheus.GaugeVec
	Oversize        *prometheus.CounterVec
	Duplicates      prometheus.Counter
	Connected       prometheus.Gauge
	HandlerTooLarge *prometheus.CounterVec
}

func newEventMetrics() *EventMetrics {
	return &EventMetrics{
		Published: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_published_total",
			Help: "Events published on NATS (acknowledged by JetStream, or flushed on core NATS), by source.",
		}, []string{"source"}),
		PublishErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_publish_errors_total",
			Help: "Publishing rounds that failed (NATS unreachable, a publish unacknowledged, a database error); they are retried.",
		}),
		Backlog: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "events_backlog",
			Help: "Events of this node not yet published on NATS, by source (counted up to 100001); reported by the Processor that publishes, source notifier where an email channel exists (or its events wait).",
		}, []string{"source"}),
		Lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "events_lag_seconds",
			Help: "Age of this node's oldest event not yet published on NATS, by source (0 when none).",
		}, []string{"source"}),
		Oversize: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_oversize_total",
			Help: "Events over the NATS max payload: published without payload (or with the error cut), or passed over when even that does not fit (logged), by source.",
		}, []string{"source"}),
		Duplicates: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "events_duplicates_total",
			Help: "Events published again after an unacknowledged attempt and dropped by JetStream as duplicates, or found stored already after a long outage and not sent again.",
		}),
		Connected: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "pgrelay", Name: "nats_connected", Help: "1 while connected to NATS.",
		}),
		HandlerTooLarge: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "pgrelay", Name: "nats_handler_too_large_total",
			Help: "Events of nats channels given up because the payload exceeds the server's max payload, by channel.",
		}, []string{"channel"}),
	}
}

// register registers the collectors on reg.
func (m *EventMetrics) register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{m.Published, m.PublishErrors, m.Backlog, m.Lag, m.Oversize, m.Duplicates,
		m.Connected, m.HandlerTooLarge} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}
