package actors

import (
	"context"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/pgrelay/pgrelay/events/store"
)

// DatabaseCollector reports, at each scrape, what the database holds, the
// same whichever pgrelay process asks: every registered channel's backlog
// as pgrelay.queue_stats() sees it (the numbers of `pgrelay stats`), its
// dead letters, and each node's live Processors (from their heartbeats in
// pgrelay.processors). A Processor registers one with its own metrics, and
// `pgrelay web --metrics-addr` serves one alone, so that these gauges are
// scraped while no Processor runs. Several scrapers report the same values:
// alert rules take max, never sum (docs/operations.md, "Metrics").
//
// Each scrape reads on its own connection of the pool, bounded by
// scrapeTimeout; a failure is counted in pgrelay_db_errors_total{op="queue_stats"}
// and leaves the gauges out of that scrape.
//
// On a node of a pgEdge Spock cluster it also reports, from
// store.SpockStatus, each subscription's state and lag and the rows of
// spock.exception_log (a failure there is counted as op="spock_status" and
// logged once). Whether the database has Spock is read with the rest: a
// database that cannot be read counts under queue_stats alone.
type DatabaseCollector struct {
	cfg DatabaseCollectorConfig

	pending, inFlight, retrying, oldestAge, paused *prometheus.Desc
	dead, deadOldest, alive                        *prometheus.Desc

	subReplicating, lagSeconds, lagBytes, exceptions *prometheus.Desc
	// spockWarned: the failure of the Spock query was logged once.
	spockWarned atomic.Bool
}

// DatabaseCollectorConfig configures a DatabaseCollector.
type DatabaseCollectorConfig struct {
	// DB is the pool the scrapes read on (required); its login needs
	// pgrelay_viewer's rights, or pgrelay_processor's.
	DB store.Querier
	// DeadAfter: a Processor whose heartbeat is older is not counted
	// alive (default 10 s, as --dead-after).
	DeadAfter time.Duration
	// Errors counts failed reads by op (required): NewDBErrors.
	Errors *prometheus.CounterVec
	// Channel, when set, is called with every registered channel at each
	// scrape.
	Channel func(channel string)
	// Logger receives the failures (default slog.Default()).
	Logger *slog.Logger
}

// scrapeTimeout bounds the queries of one scrape.
const scrapeTimeout = 5 * time.Second

// NewDBErrors is pgrelay_db_errors_total, with ops counted at zero from the
// start.
func NewDBErrors(ops ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "pgrelay", Name: "db_errors_total", Help: "Database errors by operation.",
	}, []string{"op"})
	for _, op := range ops {
		v.WithLabelValues(op)
	}
	return v
}

// NewDatabaseCollector makes the collector; register it on a
// prometheus.Registerer.
func NewDatabaseCollector(cfg DatabaseCollectorConfig) *DatabaseCollector {
	if cfg.DeadAfter <= 0 {
		cfg.DeadAfter = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc(prometheus.BuildFQName("pgrelay", "queue", name), help, []string{"channel"}, nil)
	}
	return &DatabaseCollector{cfg: cfg,
		pending:   d("pending", "Events waiting to run, by channel, from pgrelay.queue_stats() (an estimate above 100 000)."),
		inFlight:  d("in_flight", "Events claimed and running in the whole database, by channel, from pgrelay.queue_stats() (rows a direct or lane batch holds are pending until it commits)."),
		retrying:  d("retrying", "Pending events past their first attempt, by channel."),
		oldestAge: d("oldest_pending_age_seconds", "Age of the oldest pending event, by channel (0 when none)."),
		paused:    d("paused", "1 when the channel is paused, else 0."),
		dead: prometheus.NewDesc("pgrelay_dead_letters",
			"Dead letters (events that gave up or expired, kept for retry or discard), by registered channel (counted up to "+
				strconv.Itoa(store.DeadCountCap+1)+").", []string{"channel"}, nil),
		deadOldest: prometheus.NewDesc("pgrelay_dead_letters_oldest_age_seconds",
			"Age of the channel's oldest dead letter, from when its event ended (0 when none).", []string{"channel"}, nil),
		alive: prometheus.NewDesc("pgrelay_processors_alive",
			"Processors of the node whose heartbeat in pgrelay.processors is younger than --dead-after, by node (decommissioned nodes left out).",
			[]string{"node"}, nil),
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

// Describe implements prometheus.Collector.
func (c *DatabaseCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.pending, c.inFlight, c.retrying, c.oldestAge, c.paused,
		c.dead, c.deadOldest, c.alive, c.subReplicating, c.lagSeconds, c.lagBytes, c.exceptions} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *DatabaseCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	stats, err := store.QueueStats(ctx, c.cfg.DB)
	var dead []store.DeadLetterStat
	var alive map[int]int64
	if err == nil {
		dead, err = store.DeadLetterStats(ctx, c.cfg.DB)
	}
	if err == nil {
		alive, err = store.ProcessorsAlive(ctx, c.cfg.DB, c.cfg.DeadAfter)
	}
	var spock string
	if err == nil {
		spock, err = store.SpockSchema(ctx, c.cfg.DB)
	}
	if err != nil {
		c.cfg.Errors.WithLabelValues("queue_stats").Inc()
		c.cfg.Logger.Warn("metrics: cannot read the database's gauges (queue, dead letters, Processors); they are left out of this scrape", "err", err)
		return
	}
	now := time.Now()
	age := func(t *time.Time) float64 {
		if t == nil {
			return 0
		}
		return max(now.Sub(*t).Seconds(), 0)
	}
	for _, s := range stats {
		if c.cfg.Channel != nil {
			c.cfg.Channel(s.Channel)
		}
		paused := 0.0
		if s.Paused {
			paused = 1
		}
		ch <- prometheus.MustNewConstMetric(c.pending, prometheus.GaugeValue, float64(s.Pending), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.inFlight, prometheus.GaugeValue, float64(s.InFlight), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.retrying, prometheus.GaugeValue, float64(s.Retrying), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.oldestAge, prometheus.GaugeValue, age(s.OldestPending), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.GaugeValue, paused, s.Channel)
	}
	for _, s := range dead {
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(s.Count), s.Channel)
		ch <- prometheus.MustNewConstMetric(c.deadOldest, prometheus.GaugeValue, age(s.Oldest), s.Channel)
	}
	for node, n := range alive {
		ch <- prometheus.MustNewConstMetric(c.alive, prometheus.GaugeValue, float64(n), strconv.Itoa(node))
	}
	if spock != "" {
		c.collectSpock(ctx, ch, spock)
	}
}

// collectSpock reports the Spock gauges when the database, where the spock
// extension is installed in schema, is a Spock node.
func (c *DatabaseCollector) collectSpock(ctx context.Context, ch chan<- prometheus.Metric, schema string) {
	r, ok, err := store.SpockStatusIn(ctx, c.cfg.DB, schema)
	if err != nil {
		c.cfg.Errors.WithLabelValues("spock_status").Inc()
		if !c.spockWarned.Swap(true) {
			c.cfg.Logger.Warn("metrics: cannot read Spock's subscriptions and exception_log; the pgrelay_spock_* gauges are left out "+
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
