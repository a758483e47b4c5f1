package actors

import (
	"context"
	"log/slog"
	"sync/atomic"
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
//
// On a node of a pgEdge Spock cluster it also reports, from
// store.SpockStatus, each subscription's state and lag and the rows of
// spock.exception_log (a failure there is counted as op="spock_status" and
// logged once).
type backlogCollector struct {
	q       store.Querier
	metrics *Metrics
	log     *slog.Logger

	pending, inFlight, retrying, oldestAge, paused *prometheus.Desc

	subReplicating, lagSeconds, lagBytes, exceptions *prometheus.Desc
	// spockWarned: the failure of the Spock query was logged once.
	spockWarned atomic.Bool
}

// scrapeTimeout bounds the queue_stats() query of one scrape.
const scrapeTimeout = 5 * time.Second

func newBacklogCollector(q store.Querier, m *Metrics, log *slog.Logger) *backlogCollector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("pgrelay", "queue", name), help, []string{"channel"}, nil)
	}
	return &backlogCollector{q: q, metrics: m, log: log,
		pending:   d("pending", "Events waiting to run, by channel, from pgrelay.queue_stats() (an estimate above 100 000)."),
		inFlight:  d("in_flight", "Events claimed and running, by channel, from pgrelay.queue_stats() (rows a direct or lane batch holds are pending until it commits)."),
		retrying:  d("retrying", "Pending events past their first attempt, by channel."),
		oldestAge: d("oldest_pending_age_seconds", "Age of the oldest pending event, by channel (0 when none)."),
		paused:    d("paused", "1 when the channel is paused, else 0."),
		subReplicating: prometheus.NewDesc("pgrelay_spock_subscription_replicating",
			"1 when this node's Spock subscription replicates (spock.sub_show_status()), else 0.", []string{"subscription", "provider"}, nil),
		lagSeconds: prometheus.NewDesc("pgrelay_spock_replication_lag_seconds",
			"Replication lag from the provider node to this node (spock.lag_tracker).", []string{"provider"}, nil),
		lagBytes: prometheus.NewDesc("pgrelay_spock_replication_lag_bytes",
			"WAL the provider node has written that this node has not applied (spock.lag_tracker).", []string{"provider"}, nil),
		exceptions: prometheus.NewDesc("pgrelay_spock_exceptions",
			"Rows in this node's spock.exception_log: transactions from other nodes it skipped; tables='pgrelay' counts those on pgrelay's and the notifier's tables.",
			[]string{"tables"}, nil),
	}
}

func (c *backlogCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.retrying, c.oldestAge, c.paused,
		c.subReplicating, c.lagSeconds, c.lagBytes, c.exceptions} {
		ch <- d
	}
}

func (c *backlogCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	c.collectSpock(ctx, ch)
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

// collectSpock reports the Spock gauges when the database is a Spock node.
func (c *backlogCollector) collectSpock(ctx context.Context, ch chan<- prometheus.Metric) {
	r, ok, err := store.SpockStatus(ctx, c.q)
	if err != nil {
		c.metrics.DBErrors.WithLabelValues("spock_status").Inc()
		if !c.spockWarned.Swap(true) {
			c.log.Warn("metrics: cannot read Spock's subscriptions and exception_log; the pgrelay_spock_* gauges are left out "+
				"(logged once; pgrelay_db_errors_total{op=\"spock_status\"} counts each scrape)", "err", err)
		}
		return
	}
	if !ok {
		return
	}
	for _, s := range r.Subs {
		up := 0.0
		if s.Status == "replicating" {
			up = 1
		}
		ch <- prometheus.MustNewConstMetric(c.subReplicating, prometheus.GaugeValue, up, s.Name, s.Provider)
		if s.Lag != nil {
			ch <- prometheus.MustNewConstMetric(c.lagSeconds, prometheus.GaugeValue, s.Lag.Seconds(), s.Provider)
		}
		if s.LagBytes != nil {
			ch <- prometheus.MustNewConstMetric(c.lagBytes, prometheus.GaugeValue, float64(*s.LagBytes), s.Provider)
		}
	}
	ch <- prometheus.MustNewConstMetric(c.exceptions, prometheus.GaugeValue, float64(r.Exceptions), "all")
	ch <- prometheus.MustNewConstMetric(c.exceptions, prometheus.GaugeValue, float64(r.OnPgrelay), "pgrelay")
}
