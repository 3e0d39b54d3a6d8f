package daemon

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the calculation's Prometheus metrics.
type Metrics struct {
	CalcSeconds prometheus.Histogram
	Problems    prometheus.Gauge
	// Unrenderable counts, by handling and reason, each rule (or policy)
	// enforced in a fail-closed form when it appears; UnrenderableNow is
	// how many there are at present.
	Unrenderable    *prometheus.CounterVec
	UnrenderableNow prometheus.Gauge
	// InfraBadInput counts, by kind and field, each Node or IP pool field
	// felix cannot read (logged once, when it appears; the field is left
	// out, the rest of the object used); InfraBadInputNow is how many
	// there are at present.
	InfraBadInput    *prometheus.CounterVec
	InfraBadInputNow prometheus.Gauge

	// Calico felix's, with its names, types and help (but for
	// felix_resyncs_started, whose help in Calico repeats
	// felix_resync_state's by mistake).
	ActiveEndpoints, ActivePolicies, ActiveSelectors prometheus.Gauge
	ClusterHosts, ClusterWEPs, ClusterHEPs           prometheus.Gauge
	ClusterPolicies, ClusterProfiles, ClusterTiers   prometheus.Gauge
	CalcGraphUpdateTime                              prometheus.Summary
	ResyncState                                      prometheus.Gauge
	ResyncsStarted                                   prometheus.Counter
}

// calicoObjectives are the quantiles of Calico's summaries.
var calicoObjectives = map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		CalcSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "felix_calc_seconds", Help: "Time to compute and render the desired dataplane.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		Problems: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_calc_bad_input", Help: "Resources skipped because they are invalid or refer to missing ones.",
		}),
		Unrenderable: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_calc_unrenderable_rules_total",
			Help: "Policy and profile rules (or whole policies) that cannot be rendered as written, each counted " +
				"once when it appears; handling says how it is enforced instead: dropped (Allow), widened (Deny), " +
				"denied (everything reaching it is denied).",
		}, []string{"handling", "reason"}),
		UnrenderableNow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_calc_unrenderable_rules", Help: "Rules (or whole policies) currently enforced in a fail-closed form because they cannot be rendered as written.",
		}),
		InfraBadInput: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_infra_bad_input_total",
			Help: "Node and IP pool fields (addresses, CIDRs, MACs) felix cannot read, each counted once when it appears; " +
				"the field is left out (a node without a readable address gets no routes and no tunnel acceptance).",
		}, []string{"kind", "field"}),
		InfraBadInputNow: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_infra_bad_input", Help: "Node and IP pool fields felix currently cannot read.",
		}),
	}
	gauge := func(name, help string) prometheus.Gauge {
		return prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help})
	}
	m.ActiveEndpoints = gauge("felix_active_local_endpoints", "Number of active endpoints on this host.")
	m.ActivePolicies = gauge("felix_active_local_policies", "Number of active policies on this host.")
	m.ActiveSelectors = gauge("felix_active_local_selectors", "Number of active selectors on this host.")
	m.ClusterHosts = gauge("felix_cluster_num_hosts", "Total number of calico hosts in the cluster.")
	m.ClusterHEPs = gauge("felix_cluster_num_host_endpoints", "Total number of host endpoints cluster-wide.")
	m.ClusterWEPs = gauge("felix_cluster_num_workload_endpoints", "Total number of workload endpoints cluster-wide.")
	m.ClusterTiers = gauge("felix_cluster_num_tiers", "Total number of tiers cluster-wide.")
	m.ClusterPolicies = gauge("felix_cluster_num_policies", "Total number of policies cluster-wide.")
	m.ClusterProfiles = gauge("felix_cluster_num_profiles", "Total number of profiles cluster-wide.")
	m.CalcGraphUpdateTime = prometheus.NewSummary(prometheus.SummaryOpts{Name: "felix_calc_graph_update_time_seconds",
		Help: "Seconds to update calculation graph for each datastore OnUpdate call.", Objectives: calicoObjectives})
	m.ResyncState = gauge("felix_resync_state", "Current datastore state.")
	m.ResyncsStarted = prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_resyncs_started",
		Help: "Number of times felix has started resyncing with the datastore."})
	reg.MustRegister(m.CalcSeconds, m.Problems, m.Unrenderable, m.UnrenderableNow, m.InfraBadInput, m.InfraBadInputNow,
		m.ActiveEndpoints, m.ActivePolicies, m.ActiveSelectors, m.ClusterHosts, m.ClusterHEPs, m.ClusterWEPs,
		m.ClusterTiers, m.ClusterPolicies, m.ClusterProfiles, m.CalcGraphUpdateTime, m.ResyncState, m.ResyncsStarted)
	return m
}
