package actors

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/events/store"
)

// backlogCollector reports, at each scrape, every registered channel's
// backlog as pgrelay.queue_stats() sees it (the numbers of `pgrelay stats`),
// and makes the Processor's per-channel counters start at zero for every
// registered channel, so that an alert on them is not blind until a first
// failure. One query per scrape, on the background pool, bounded by
// scrapeTimeout; a failure is counted in pgrelay_db_errors_total{op="queue_stats"}
// and leaves the gauges out of that scrape.
type backlogCollector struct {
	q       store.Queryer
	metrics *Metrics
	log     *slog.Logger

	pending, inFlight, retrying, oldestAge, paused *prometheus.Desc
}

// scrapeTimeout bounds the queue_stats() query of one scrape.
const scrapeTimeout = 5 * time.Second

func newBacklogCollector(q store.Queryer, m *Metrics, log *slog.Logger) *backlogCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("pgrelay", "queue", name), help, []string{"channel"}, nil)
	}
	return &backlogCollector{q: q, metrics: m, log: log,
		pending:   d("pending", "Events waiting to run, by channel, from pgrelay.queue_stats() (an estimate above 100 000)."),
		inFlight:  d("in_flight", "Events claimed and running, by channel, from pgrelay.queue_stats() (rows a direct or lane batch holds are pending until it commits)."),
		retrying:  d("retrying", "Pending events past their first attempt, by channel."),
		oldestAge: d("oldest_pending_age_seconds", "Age of the oldest pending event, by channel (0 when none)."),
		paused:    d("paused", "1 when the channel is paused, else 0."),
	}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.retrying, c.oldestAge, c.paused} {
		ch <- d
	}
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	stats, err := store.QueueStats(ctx, c.q)
	if err != nil {
		c.metrics.DBErrors.WithLabelValues("queue_stats").Inc()
		c.log.Warn("metrics: queue_stats failed; the backlog gauges are left out of this scrape", "err", err)
		return
	}
	now := time.Now()
	for _, s := range stats {
		c.metrics.initChannel(s.Channel)
		age := 0.0
		if s.OldestPending != nil {
			age = max(now.Sub(*s.OldestPending).Seconds(), 0)
		}
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(s.Retrying), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, age, s.Channel)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, s.Channel)
	}
}
