// Package daemon wires felix together: a datastore syncer feeds a resource
// cache; on every change (coalesced) the cache is turned into a
// calc.Input, computed, rendered for each IP version and handed to the
// dataplane, which reconciles the kernel in its own loop. Nothing is
// programmed before the syncer has delivered a complete snapshot.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"reflect"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/health"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/rules"
)

// levelTrace is Calico's TRACE severity (below DEBUG).
const levelTrace = slog.Level(-8)

// Kinds are the resource kinds felix watches: the policy path's and the
// route manager's (routes.Kinds, handed to Config.Routes).
var Kinds = append([]string{
	v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy,
	v3.KindTier, v3.KindProfile, v3.KindNetworkSet, v3.KindGlobalNetworkSet, v3.KindFelixConfiguration,
}, routes.Kinds...)

// Dataplane is what the daemon needs of dataplane.Dataplane.
type Dataplane interface {
	SetDesired(rulesets ...*rules.Ruleset)
	Run(ctx context.Context) error
}

// EndpointStatusReporter is what the daemon needs of epstatus.Reporter.
type EndpointStatusReporter interface {
	Desired(gen uint64, names []string)
}

// HostInterfaceLister lists the node's interfaces and their addresses
// (dataplane.Dataplane implements it).
type HostInterfaceLister interface {
	HostInterfaces(ctx context.Context) (map[string][]netip.Addr, error)
}

// Config configures a Daemon.
type Config struct {
	NodeName string
	// Rules is the rendering configuration before any FelixConfiguration
	// is known.
	Rules rules.Config
	// RulesConfig, if set, derives the rendering configuration from the
	// global ("default") and this node's ("node.<name>")
	// FelixConfiguration specs (either may be nil) whenever they change.
	RulesConfig func(global, node *v3.FelixConfigurationSpec) rules.Config
	// IPVersions to render (default [4]).
	IPVersions []int
	Dataplane  Dataplane
	// Debounce is how long a computation waits for updates arriving
	// together (default 2ms). Updates arriving while one computes are
	// coalesced into the next, and under sustained churn the next waits as
	// long as the last one took, so computing uses at most about half a
	// core while an isolated change is programmed at once.
	Debounce time.Duration
	// HostInterfaceInterval is how often, while a local host endpoint is
	// given by expectedIPs only, the node's interface addresses are
	// re-read to follow an address moving between interfaces (default
	// 10s). The Dataplane must implement HostInterfaceLister for such
	// host endpoints to be rendered.
	HostInterfaceInterval time.Duration
	Logger                *slog.Logger
	// Metrics, if set, records calculations and bad input.
	Metrics *Metrics
	// Health, if set, is told when each computation starts and ends (a
	// computation that never ends fails liveness).
	Health *health.Loop
	// EndpointStatus, if set, is told after each computation which local
	// workload endpoints (by status file name) the ruleset generation
	// handed to the Dataplane holds; the Dataplane must then have a
	// Generation() method (dataplane.Dataplane has).
	EndpointStatus EndpointStatusReporter
	// Routes, if set, receives the sync status and the updates of the
	// route manager's kinds (routes.Kinds), which the policy path does
	// not keep.
	Routes datastore.SyncerCallbacks
	// Heartbeat, if set, is called on every turn of Run's loop, at least
	// every HostInterfaceInterval: a stuck computation stops it.
	Heartbeat func()
}

// Metrics are the calculation's Prometheus metrics.
type Metrics struct {
	CalcSeconds prometheus.Histogram
	Problems    prometheus.Gauge
	// Unrenderable counts, by handling and reason, each rule (or policy)
	// enforced in a fail-closed form when it appears; UnrenderableNow is
	// how many there are at present.
	Unrenderable    *prometheus.CounterVec
	UnrenderableNow prometheus.Gauge

	// Calico felix's, with its names, types and help.
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
	m.ResyncsStarted = prometheus.NewCounter(prometheus.CounterOpts{Name: "felix_resyncs_started", Help: "Current datastore state."})
	reg.MustRegister(m.CalcSeconds, m.Problems, m.Unrenderable, m.UnrenderableNow,
		m.ActiveEndpoints, m.ActivePolicies, m.ActiveSelectors, m.ClusterHosts, m.ClusterHEPs, m.ClusterWEPs,
		m.ClusterTiers, m.ClusterPolicies, m.ClusterProfiles, m.CalcGraphUpdateTime, m.ResyncState, m.ResyncsStarted)
	return m
}

// Daemon is felix's policy pipeline. Its syncer callbacks may be called
// from any goroutine (the syncer serialises them); Run owns every goroutine
// it starts.
type Daemon struct {
	cfg Config
	log *slog.Logger

	mu       sync.Mutex
	objs     map[datastore.Key]v3.Resource
	inSync   bool
	problems map[calc.Problem]bool
	// unrenderable are the last computation's unrenderable rules (each
	// logged and counted once, when it appears).
	unrenderable map[calc.Unrenderable]bool

	// Used only by Recompute (one at a time): the calculation's and the
	// renderers' memory of unchanged objects and chains, and the rendering
	// configuration they were made for.
	memo      *calc.Memo
	renderers []*rules.Renderer
	rulesCfg  rules.Config

	// natPools are the IP pools of the last input (for NAT outgoing),
	// localWEPs this node's workload endpoints by calc key.
	natPools  []rules.NATPool
	localWEPs map[string]*v3.WorkloadEndpoint
	// tunnels is the encapsulated traffic the node accepts, and from whom.
	tunnels rules.TunnelConfig

	// ipOnlyHEPs says the last computation had a local host endpoint
	// given by expectedIPs only (Run then re-reads the addresses).
	ipOnlyHEPs atomic.Bool

	dirty chan struct{}

	// resyncCounted: the first resync has been counted.
	resyncCounted bool
	// counts are the cluster's resources by kind at the last input.
	counts map[string]int
}

// New returns a Daemon.
func New(cfg Config) *Daemon {
	if len(cfg.IPVersions) == 0 {
		cfg.IPVersions = []int{4}
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = 2 * time.Millisecond
	}
	if cfg.HostInterfaceInterval == 0 {
		cfg.HostInterfaceInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, objs: map[datastore.Key]v3.Resource{},
		problems: map[calc.Problem]bool{}, unrenderable: map[calc.Unrenderable]bool{}, dirty: make(chan struct{}, 1), memo: calc.NewMemo()}
	d.setRulesConfig(cfg.Rules)
	return d
}

func (d *Daemon) setRulesConfig(rc rules.Config) {
	d.rulesCfg = rc
	d.renderers = nil
	for _, v := range d.cfg.IPVersions {
		d.renderers = append(d.renderers, rules.NewRenderer(rc, v))
	}
}

// OnStatusUpdated implements datastore.SyncerCallbacks.
func (d *Daemon) OnStatusUpdated(s datastore.SyncStatus) {
	d.mu.Lock()
	wasInSync := d.inSync
	d.inSync = s == datastore.StatusInSync
	d.mu.Unlock()
	if m := d.cfg.Metrics; m != nil {
		// Calico's felix_resync_state: 1 waiting for the datastore (a
		// resync starts), 3 in sync.
		if s == datastore.StatusInSync {
			m.ResyncState.Set(3)
		} else {
			m.ResyncState.Set(1)
			if wasInSync || !d.resyncCounted {
				m.ResyncsStarted.Inc()
				d.resyncCounted = true
			}
		}
	}
	d.log.Info("datastore sync status", "status", s)
	if d.cfg.Routes != nil {
		d.cfg.Routes.OnStatusUpdated(s)
	}
	d.kick()
}

// OnUpdates implements datastore.SyncerCallbacks.
func (d *Daemon) OnUpdates(ups []datastore.Update) {
	if d.cfg.Routes != nil {
		d.cfg.Routes.OnUpdates(ups)
	}
	policy := false
	if d.log.Enabled(context.Background(), levelTrace) {
		for _, u := range ups {
			d.log.Log(context.Background(), levelTrace, "datastore update", "key", u.Key.String(), "type", u.Type)
		}
	}
	d.mu.Lock()
	for _, u := range ups {
		if u.Key.Kind == v3.KindIPAMBlock {
			continue // the route manager's only
		}
		policy = true
		if u.Type == datastore.EventDeleted {
			delete(d.objs, u.Key)
		} else {
			d.objs[u.Key] = u.Object
		}
	}
	d.mu.Unlock()
	if policy {
		d.kick()
	}
}

func (d *Daemon) kick() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// input snapshots the cache; ok is false before the first full snapshot.
// global and node are the FelixConfiguration specs, nil when absent.
func (d *Daemon) input() (in calc.Input, global, node *v3.FelixConfigurationSpec, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	in = calc.Input{Node: d.cfg.NodeName}
	if !d.inSync {
		return in, nil, nil, false
	}
	d.natPools = d.natPools[:0]
	d.tunnels = rules.TunnelConfig{}
	clear(d.localWEPs)
	if d.localWEPs == nil {
		d.localWEPs = map[string]*v3.WorkloadEndpoint{}
	}
	if d.counts == nil {
		d.counts = map[string]int{}
	}
	clear(d.counts)
	for k := range d.objs {
		d.counts[k.Kind]++
	}
	for _, o := range d.objs {
		if w, ok := o.(*v3.WorkloadEndpoint); ok && w.Spec.Node == d.cfg.NodeName {
			d.localWEPs[w.Namespace+"/"+w.Name] = w
		}
		if in.Add(o) {
			continue
		}
		switch o := o.(type) {
		case *v3.IPPool:
			if cidr, err := netip.ParsePrefix(o.Spec.CIDR); err == nil {
				d.natPools = append(d.natPools, rules.NATPool{CIDR: cidr, NATOutgoing: o.Spec.NATOutgoing})
				d.tunnels.IPIP = d.tunnels.IPIP || (cidr.Addr().Is4() && (o.Spec.IPIPMode == v3.IPIPModeAlways || o.Spec.IPIPMode == v3.IPIPModeCrossSubnet))
				d.tunnels.VXLAN = d.tunnels.VXLAN || o.Spec.VXLANMode == v3.VXLANModeAlways || o.Spec.VXLANMode == v3.VXLANModeCrossSubnet
			}
		case *v3.Node:
			if o.Spec.BGP == nil {
				continue
			}
			for _, s := range []string{o.Spec.BGP.IPv4Address, o.Spec.BGP.IPv6Address} {
				p, err := netip.ParsePrefix(s)
				if err != nil {
					continue
				}
				d.tunnels.AllHosts = append(d.tunnels.AllHosts, p.Addr())
				if (p.Addr().Is4() && o.Spec.IPv4VXLANTunnelAddr != "") || (p.Addr().Is6() && o.Spec.IPv6VXLANTunnelAddr != "") {
					d.tunnels.VXLANHosts = append(d.tunnels.VXLANHosts, p.Addr())
				}
			}
		case *v3.FelixConfiguration:
			switch o.Name {
			case "default":
				global = &o.Spec
			case v3.FelixConfigurationNamePrefix + d.cfg.NodeName:
				node = &o.Spec
			}
		}
	}
	return in, global, node, true
}

// Recompute runs the calculation over the current cache and hands the
// result to the dataplane. It reports whether it did (false before the
// first snapshot). Calls must not overlap (Run makes them one at a time).
// Objects in the cache are replaced, never modified, on update, which is
// what lets the memo recognise unchanged objects by pointer.
func (d *Daemon) Recompute() bool {
	in, global, node, ok := d.input()
	if !ok {
		return false
	}
	if d.cfg.RulesConfig != nil {
		rc := d.cfg.RulesConfig(global, node)
		rc.HostInterfaces = d.rulesCfg.HostInterfaces
		if !reflect.DeepEqual(rc, d.rulesCfg) {
			d.log.Info("rendering configuration changed", "config", fmt.Sprintf("%+v", rc))
			d.setRulesConfig(rc)
		}
	}
	start := time.Now()
	res := calc.ComputeWith(in, d.memo)
	d.resolveHostInterfaces(res)
	var rss []*rules.Ruleset
	for _, r := range d.renderers {
		rs := rules.WithNATOutgoing(r.Render(res), rules.NATConfig{Pools: d.natPools, OutgoingAddress: d.rulesCfg.NATOutgoingAddress})
		rs = rules.WithTunnelInput(rs, d.tunnels)
		rss = append(rss, rules.WithWorkloadRPF(rs, d.rulesCfg.WorkloadIfacePrefixes))
	}
	d.cfg.Dataplane.SetDesired(rss...)
	d.reportEndpoints(res)
	// Log each problem once, when it appears.
	current := map[calc.Problem]bool{}
	for _, p := range res.Problems {
		current[p] = true
		if !d.problems[p] {
			d.log.Warn("skipping bad input", "kind", p.Kind, "namespace", p.Namespace, "name", p.Name, "reason", p.Reason)
		}
	}
	d.problems = current
	unrenderable := map[calc.Unrenderable]bool{}
	for _, u := range res.Unrenderable {
		unrenderable[u] = true
		if d.unrenderable[u] {
			continue
		}
		d.log.Warn("rule cannot be enforced as written; enforcing it fail-closed",
			"kind", u.Kind, "namespace", u.Namespace, "name", u.Name, "direction", u.Direction, "rule", u.Rule,
			"action", u.Action, "handling", u.Handling, "reason", u.Reason, "detail", u.Detail)
		if m := d.cfg.Metrics; m != nil {
			m.Unrenderable.WithLabelValues(string(u.Handling), u.Reason).Inc()
		}
	}
	d.unrenderable = unrenderable
	if m := d.cfg.Metrics; m != nil {
		m.CalcSeconds.Observe(time.Since(start).Seconds())
		m.Problems.Set(float64(len(current)))
		m.UnrenderableNow.Set(float64(len(unrenderable)))
		m.CalcGraphUpdateTime.Observe(time.Since(start).Seconds())
		m.ActiveEndpoints.Set(float64(len(res.Endpoints)))
		m.ActivePolicies.Set(float64(len(res.Policies)))
		m.ActiveSelectors.Set(float64(len(res.IPSets)))
		d.mu.Lock()
		c := d.counts
		m.ClusterHosts.Set(float64(c[v3.KindNode]))
		m.ClusterWEPs.Set(float64(c[v3.KindWorkloadEndpoint]))
		m.ClusterHEPs.Set(float64(c[v3.KindHostEndpoint]))
		m.ClusterTiers.Set(float64(c[v3.KindTier]))
		m.ClusterPolicies.Set(float64(c[v3.KindNetworkPolicy] + c[v3.KindGlobalNetworkPolicy]))
		m.ClusterProfiles.Set(float64(c[v3.KindProfile]))
		d.mu.Unlock()
	}
	d.log.Debug("recomputed", "duration", time.Since(start), "endpoints", len(res.Endpoints), "policies", len(res.Policies))
	return true
}

// reportEndpoints tells the endpoint status reporter which local
// workload endpoints the ruleset just handed over programs.
func (d *Daemon) reportEndpoints(res *calc.Result) {
	if d.cfg.EndpointStatus == nil {
		return
	}
	g, ok := d.cfg.Dataplane.(interface{ Generation() uint64 })
	if !ok {
		d.log.Warn("endpoint status needs a dataplane with generations")
		return
	}
	var names []string
	for _, ep := range res.Endpoints {
		if w := d.localWEPs[ep.Key]; ep.Kind == calc.Workload && w != nil {
			names = append(names, epstatus.Filename(w))
		}
	}
	d.cfg.EndpointStatus.Desired(g.Generation(), names)
}

// resolveHostInterfaces reads the node's interface addresses when a local
// host endpoint needs them (expectedIPs only) and renders with them; the
// renderers are replaced only when the addresses changed.
func (d *Daemon) resolveHostInterfaces(res *calc.Result) {
	need := false
	for _, ep := range res.Endpoints {
		if ep.Kind == calc.Host && ep.Interface == "" {
			need = true
			break
		}
	}
	d.ipOnlyHEPs.Store(need)
	var ifaces map[string][]netip.Addr
	if need {
		lister, ok := d.cfg.Dataplane.(HostInterfaceLister)
		if !ok {
			d.log.Warn("host endpoints by expectedIPs need the interface addresses, which this dataplane cannot list")
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var err error
		if ifaces, err = lister.HostInterfaces(ctx); err != nil {
			d.log.Warn("listing host interfaces; keeping the last known", "error", err)
			return
		}
	}
	if !reflect.DeepEqual(ifaces, d.rulesCfg.HostInterfaces) {
		rc := d.rulesCfg
		rc.HostInterfaces = ifaces
		d.log.Info("host interface addresses changed", "interfaces", fmt.Sprint(ifaces))
		d.setRulesConfig(rc)
	}
}

// Run starts the dataplane loop and the syncer (when given) and recomputes
// on every change until ctx ends. It returns after all its goroutines have
// stopped.
func (d *Daemon) Run(ctx context.Context, syncer datastore.Syncer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	dpErr := make(chan error, 1)
	wg.Add(1)
	go func() {
		defer wg.Done()
		dpErr <- d.cfg.Dataplane.Run(ctx)
	}()
	if syncer != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			syncer.Run(ctx)
		}()
	}
	defer wg.Wait()
	ifaceTick := time.NewTicker(d.cfg.HostInterfaceInterval)
	defer ifaceTick.Stop()
	var lastEnd time.Time
	var lastTook time.Duration
	for {
		if d.cfg.Heartbeat != nil {
			d.cfg.Heartbeat()
		}
		select {
		case <-ctx.Done():
			return nil
		case err := <-dpErr:
			if err != nil && ctx.Err() == nil {
				return err
			}
			return nil
		case <-d.dirty:
		case <-ifaceTick.C:
			if !d.ipOnlyHEPs.Load() {
				continue
			}
		}
		// Coalesce a burst of updates into one computation.
		wait := max(d.cfg.Debounce, time.Until(lastEnd.Add(lastTook)))
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		start := time.Now()
		d.cfg.Health.Begin()
		d.Recompute()
		d.cfg.Health.End()
		lastEnd = time.Now()
		lastTook = lastEnd.Sub(start)
	}
}
