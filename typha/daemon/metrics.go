package daemon

import "github.com/prometheus/client_golang/prometheus"

// cacheMetrics are Calico's snapshot cache metric names.
type cacheMetrics struct {
	updates *prometheus.CounterVec
	size    *prometheus.GaugeVec
}

func newCacheMetrics(reg prometheus.Registerer) *cacheMetrics {
	m := &cacheMetrics{
		updates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "typha_updates_total",
			Help: "Total number of updates received from the Syncer."}, []string{"syncer"}),
		size: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "typha_cache_size",
			Help: "The number of key/value pairs in Typha's in-memory cache."}, []string{"syncer"}),
	}
	reg.MustRegister(m.updates, m.size)
	return m
}

type syncerMetrics struct {
	updates prometheus.Counter
	size    prometheus.Gauge
}

func (m *cacheMetrics) forSyncer(name string) *syncerMetrics {
	return &syncerMetrics{updates: m.updates.WithLabelValues(name), size: m.size.WithLabelValues(name)}
}

func (s *syncerMetrics) Updates(n int) { s.updates.Add(float64(n)) }
func (s *syncerMetrics) Size(n int)    { s.size.Set(float64(n)) }
