package collector

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the collector's own, under Calico's names (its felix
// dashboard reads them): NFLOG logs received, buffer overruns (logs the
// kernel dropped), parse errors and time blocked handing logs to the
// aggregator, per group; flows created and flushed; conntrack reads.
type Metrics struct {
	logs, overruns, parseErrors, blocked *prometheus.CounterVec
	created, flushed                     prometheus.Counter
	conntrack                            prometheus.Histogram
	tracked                              prometheus.Gauge
}

// NewMetrics registers the collector's metrics with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	group := []string{"groupNum"}
	m := &Metrics{
		logs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_nflog_logs_received",
			Help: "NFLOG messages received, by group."}, group),
		overruns: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_nflog_buffer_overruns",
			Help: "Times the NFLOG socket's buffer overran: the kernel dropped logs (flow counts are then low)."}, group),
		parseErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_nflog_parse_errors",
			Help: "NFLOG messages whose prefix or packet could not be read."}, group),
		blocked: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "felix_nflog_block_time_seconds",
			Help: "Time the NFLOG reader waited to hand logs to the aggregator."}, group),
		created: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_nflog_aggregates_created",
			Help: "Flows (flow keys of an interval) created."}),
		flushed: prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_nflog_aggregates_flushed",
			Help: "Flows flushed to the flow log."}),
		conntrack: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "felix_collector_conntrack_processing_latency_seconds",
			Help: "Time to read conntrack and credit the allowed connections.", Buckets: prometheus.ExponentialBuckets(0.0005, 4, 8)}),
		tracked: prometheus.NewGauge(prometheus.GaugeOpts{Name: "felix_collector_epstats",
			Help: "Allowed connections the collector follows in conntrack."}),
	}
	if reg != nil {
		reg.MustRegister(m.logs, m.overruns, m.parseErrors, m.blocked, m.created, m.flushed, m.conntrack, m.tracked)
	}
	return m
}

func groupLabel(g uint16) string { return strconv.Itoa(int(g)) }
