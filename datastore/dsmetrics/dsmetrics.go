// Package dsmetrics exposes the datastore's counts (package datastore
// keeps them without a metrics library, see datastore.MetricCounts) as
// Prometheus metrics, for long-running components.
package dsmetrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tabbynet/tabby/datastore"
)

var (
	undecodableDesc = prometheus.NewDesc("tabby_datastore_undecodable_records_total",
		"Stored records a syncer skipped because they cannot be decoded, each key and revision counted once.",
		[]string{"kind"}, nil)
	unconvertibleDesc = prometheus.NewDesc("tabby_datastore_unconvertible_rules_total",
		"Rules of derived policies (Kubernetes ClusterNetworkPolicies) that could not be converted and fail closed (a Deny or Pass denies all, an Accept is dropped), each policy revision counted once.",
		[]string{"kind"}, nil)
)

// collector reads the datastore's counts at each scrape.
type collector struct{}

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- undecodableDesc
	ch <- unconvertibleDesc
}

func (collector) Collect(ch chan<- prometheus.Metric) {
	undecodable, unconvertible := datastore.MetricCounts()
	for kind, n := range undecodable {
		ch <- prometheus.MustNewConstMetric(undecodableDesc, prometheus.CounterValue, float64(n), kind)
	}
	for kind, n := range unconvertible {
		ch <- prometheus.MustNewConstMetric(unconvertibleDesc, prometheus.CounterValue, float64(n), kind)
	}
}

// Register registers the datastore's metrics (the undecodable record
// counter of every syncer in the process, the unconvertible rules of
// derived policies) with reg; registering them twice is not an error.
func Register(reg prometheus.Registerer) error {
	if err := reg.Register(collector{}); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			return nil
		}
		return fmt.Errorf("registering datastore metrics: %w", err)
	}
	return nil
}
