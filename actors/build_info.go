package actors

import "github.com/prometheus/client_golang/prometheus"

// newBuildInfo is pgrelay_build_info: 1, labelled with the release the
// Processor reports (Config.Version), as pgrelay.processors records it.
func newBuildInfo(release string) prometheus.Gauge {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "pgrelay", Name: "build_info",
		Help:        "Always 1; the label version is the release this Processor runs (as pgrelay version and pgrelay nodes show it).",
		ConstLabels: prometheus.Labels{"version": release},
	})
	g.Set(1)
	return g
}
