package dataplane

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the dataplane's Prometheus metrics. A nil *Metrics records
// nothing.
type Metrics struct {
	ApplySeconds    prometheus.Histogram
	Restores        *prometheus.CounterVec // by tool: iptables, ip6tables, ipset
	Failures        prometheus.Counter
	RulesProgrammed prometheus.Gauge
	SetsProgrammed  prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ApplySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "felix_dataplane_apply_seconds", Help: "Time to reconcile the kernel with the desired state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		Restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_dataplane_restore_calls_total", Help: "iptables-restore and ipset restore runs.",
		}, []string{"tool"}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_dataplane_failures_total", Help: "Failed dataplane syncs (each forces a full resync).",
		}),
		RulesProgrammed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_dataplane_rules", Help: "iptables rules felix has programmed, all tables and IP versions.",
		}),
		SetsProgrammed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_dataplane_ipsets", Help: "ipsets felix has programmed.",
		}),
	}
	reg.MustRegister(m.ApplySeconds, m.Restores, m.Failures, m.RulesProgrammed, m.SetsProgrammed)
	return m
}
