package dataplane

import (
	"context"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// calicoObjectives are the quantiles of Calico's summaries
// (libcalico-go's prometheus.DefObjectives).
var calicoObjectives = map[float64]float64{0.5: 0.05, 0.9: 0.01, 0.99: 0.001}

// Metrics are the dataplane's Prometheus metrics: Calico felix's
// (felix_int_dataplane_*, felix_iptables_*, felix_ipset*, with Calico's
// names, types, labels and help) and Tabby's own (felix_dataplane_*). A
// nil *Metrics records nothing.
type Metrics struct {
	ApplySeconds    prometheus.Histogram
	Restores        *prometheus.CounterVec // by tool: iptables, ip6tables, ipset
	Failures        prometheus.Counter
	RulesProgrammed prometheus.Gauge
	SetsProgrammed  prometheus.Gauge
	// ObjectFailures counts failed attempts to program one object, by
	// kind (ipset, chain); Unprogrammed is how many are unprogrammed now.
	ObjectFailures *prometheus.CounterVec
	Unprogrammed   *prometheus.GaugeVec

	// Calico's.
	ApplyTime          prometheus.Summary // felix_int_dataplane_apply_time_seconds
	IntFailures        prometheus.Counter // felix_int_dataplane_failures
	InitialResync      prometheus.Gauge   // felix_int_dataplane_initial_resync_time_seconds
	RestoreCalls       prometheus.Counter
	RestoreErrors      prometheus.Counter
	SaveCalls          prometheus.Counter
	SaveErrors         prometheus.Counter
	IptablesRules      *prometheus.GaugeVec // ip_version, table
	IptablesChains     *prometheus.GaugeVec // ip_version, table
	IPSetCalls         prometheus.Counter
	IPSetErrors        prometheus.Counter
	IPSetsCalico       *prometheus.GaugeVec // ip_version
	IPSetsTotal        prometheus.Gauge
	ExecTimeMicros     prometheus.Summary
	initialResyncDone  bool
	initialResyncStart time.Time
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help})
	}
	m := &Metrics{
		ApplySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "felix_dataplane_apply_seconds", Help: "Time to reconcile the kernel with the desired state.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}),
		Restores: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_dataplane_restore_calls_total", Help: "iptables-restore and ipset restore runs.",
		}, []string{"tool"}),
		Failures: counter("felix_dataplane_failures_total", "Failed dataplane syncs (each forces a full resync)."),
		RulesProgrammed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_dataplane_rules", Help: "iptables rules felix has programmed, all tables and IP versions.",
		}),
		SetsProgrammed: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_dataplane_ipsets", Help: "ipsets felix has programmed.",
		}),
		ObjectFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "felix_dataplane_object_failures_total",
			Help: "Failed attempts to program one ipset or chain (the rest of the dataplane is still programmed; rules depending on it drop).",
		}, []string{"kind"}),
		Unprogrammed: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "felix_dataplane_unprogrammed_objects",
			Help: "ipsets and chains felix could not program and is retrying (their rules fail closed).",
		}, []string{"kind"}),
		ApplyTime: prometheus.NewSummary(prometheus.SummaryOpts{Name: "felix_int_dataplane_apply_time_seconds",
			Help:       "Time in seconds for each incremental update to the dataplane (after the initial resync).",
			Objectives: calicoObjectives}),
		IntFailures: counter("felix_int_dataplane_failures", "Number of times dataplane updates failed and will be retried."),
		InitialResync: prometheus.NewGauge(prometheus.GaugeOpts{Name: "felix_int_dataplane_initial_resync_time_seconds",
			Help: "Time in seconds that it took to do the initial resync with the dataplane and bring the dataplane into sync for the first time."}),
		RestoreCalls:  counter("felix_iptables_restore_calls", "Number of iptables-restore calls."),
		RestoreErrors: counter("felix_iptables_restore_errors", "Number of iptables-restore errors."),
		SaveCalls:     counter("felix_iptables_save_calls", "Number of iptables-save calls."),
		SaveErrors:    counter("felix_iptables_save_errors", "Number of iptables-save errors."),
		IptablesRules: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "felix_iptables_rules", Help: "Number of active iptables rules."},
			[]string{"ip_version", "table"}),
		IptablesChains: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "felix_iptables_chains", Help: "Number of active iptables chains."},
			[]string{"ip_version", "table"}),
		IPSetCalls:  counter("felix_ipset_calls", "Number of ipset commands executed."),
		IPSetErrors: counter("felix_ipset_errors", "Number of ipset command failures."),
		IPSetsCalico: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "felix_ipsets_calico", Help: "Number of active Calico IP sets."},
			[]string{"ip_version"}),
		IPSetsTotal: prometheus.NewGauge(prometheus.GaugeOpts{Name: "felix_ipsets_total", Help: "Total number of active IP sets."}),
		ExecTimeMicros: prometheus.NewSummary(prometheus.SummaryOpts{Name: "felix_exec_time_micros",
			Help: "Summary of time taken to fork/exec child processes", Objectives: calicoObjectives}),
		initialResyncStart: time.Now(),
	}
	reg.MustRegister(m.ApplySeconds, m.Restores, m.Failures, m.RulesProgrammed, m.SetsProgrammed, m.ObjectFailures, m.Unprogrammed,
		m.ApplyTime, m.IntFailures, m.InitialResync, m.RestoreCalls, m.RestoreErrors, m.SaveCalls, m.SaveErrors,
		m.IptablesRules, m.IptablesChains, m.IPSetCalls, m.IPSetErrors, m.IPSetsCalico, m.IPSetsTotal, m.ExecTimeMicros)
	// Calico exports the error counters from the start (the dashboard adds
	// their rates); labelled gauges get their series once programmed.
	for _, kind := range []string{"ipset", "chain"} {
		m.ObjectFailures.WithLabelValues(kind)
		m.Unprogrammed.WithLabelValues(kind)
	}
	return m
}

// countingRunner counts the commands run, as Calico's felix does, by tool:
// iptables(-nft|-legacy)-save/-restore (IPv4 and IPv6 alike) and ipset.
type countingRunner struct {
	Runner
	m *Metrics
}

func (r countingRunner) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	start := time.Now()
	out, err := r.Runner.Run(ctx, name, args, stdin)
	r.m.ExecTimeMicros.Observe(float64(time.Since(start).Microseconds()))
	var calls, errs prometheus.Counter
	switch {
	case strings.HasSuffix(name, "-save"):
		calls, errs = r.m.SaveCalls, r.m.SaveErrors
	case strings.HasSuffix(name, "-restore"):
		calls, errs = r.m.RestoreCalls, r.m.RestoreErrors
	case name == "ipset":
		calls, errs = r.m.IPSetCalls, r.m.IPSetErrors
	default:
		return out, err
	}
	calls.Inc()
	if err != nil && ctx.Err() == nil {
		errs.Inc()
	}
	return out, err
}
