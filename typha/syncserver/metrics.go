package syncserver

import "github.com/prometheus/client_golang/prometheus"

// metrics are Calico's Typha server metric names.
type metrics struct {
	accepted    prometheus.Counter
	dropped     prometheus.Counter
	active      prometheus.Gauge
	streaming   *prometheus.GaugeVec
	pingLatency prometheus.Summary
	kvsSent     prometheus.Counter

	// The binary snapshots' (Calico's names), by syncer.
	snapsGenerated, snapsReused *prometheus.CounterVec
	snapRawBytes, snapBytes     *prometheus.GaugeVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		accepted: prometheus.NewCounter(prometheus.CounterOpts{Name: "typha_connections_accepted",
			Help: "Total number of connections accepted over time."}),
		dropped: prometheus.NewCounter(prometheus.CounterOpts{Name: "typha_connections_dropped",
			Help: "Total number of connections dropped due to rebalancing."}),
		active: prometheus.NewGauge(prometheus.GaugeOpts{Name: "typha_connections_active",
			Help: "Number of open client connections, including connections that are still in the handshake."}),
		streaming: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "typha_connections_streaming",
			Help: "Number of client connections that completed the handshake and are streaming data."}, []string{"syncer"}),
		pingLatency: prometheus.NewSummary(prometheus.SummaryOpts{Name: "typha_ping_latency",
			Help: "Round-trip ping latency to client.", Objectives: map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}}),
		kvsSent: prometheus.NewCounter(prometheus.CounterOpts{Name: "typha_kvs_sent_total",
			Help: "Total number of key/value updates sent to clients (snapshots included)."}),
		snapsGenerated: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "typha_snapshots_generated",
			Help: "Number of binary snapshots generated."}, []string{"syncer"}),
		snapsReused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "typha_snapshots_reused",
			Help: "Number of binary snapshots that were cached and reused."}, []string{"syncer"}),
		snapRawBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "typha_snapshot_raw_bytes",
			Help: "Size of the most recently generated binary snapshot (before compression)."}, []string{"syncer"}),
		snapBytes: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "typha_snapshot_compressed_bytes",
			Help: "Size of the most recently generated binary snapshot (after compression)."}, []string{"syncer"}),
	}
	if reg != nil {
		reg.MustRegister(m.accepted, m.dropped, m.active, m.streaming, m.pingLatency, m.kvsSent,
			m.snapsGenerated, m.snapsReused, m.snapRawBytes, m.snapBytes)
	}
	return m
}
