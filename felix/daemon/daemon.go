// Package daemon wires felix together: a datastore syncer's updates are
// fed (coalesced, only what changed) to the incremental calculation
// (calc.Engine, whose work is proportional to what changed); its result is
// rendered for each IP version and handed to the dataplane, which
// reconciles the kernel in its own loop. Nothing is programmed before the
// syncer has delivered a complete snapshot.
package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
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
	// computedOnce: the first snapshot has been computed (logged at Info).
	computedOnce bool

	mu     sync.Mutex
	inSync bool
	// pending are the calculation's resources changed since the last
	// computation (the latest change per key).
	pending map[datastore.Key]pendingChange
	// sizes are the snapshot sizes announced (OnSnapshotSize) and not
	// yet passed to the calculation, by kind.
	sizes map[string]int
	// The kinds outside the calculation, kept whole (they are few): IP
	// pools and nodes (NAT outgoing, tunnel rules) and the default and
	// this node's FelixConfiguration specs. infraChanged says one of them
	// changed since the last computation.
	pools        map[string]*v3.IPPool
	nodes        map[string]*v3.Node
	global, node *v3.FelixConfigurationSpec
	infraChanged bool

	problems map[calc.Problem]bool
	// unrenderable are the last computation's unrenderable rules (each
	// logged and counted once, when it appears).
	unrenderable map[calc.Unrenderable]bool

	// Used only by Recompute (one at a time): the incremental
	// calculation, the renderers' memory of unchanged chains, and the
	// rendering configuration they were made for.
	engine    *calc.Engine
	renderers []*rules.Renderer
	rulesCfg  rules.Config
	// renderNeeded: the renderers are new (first computation, changed
	// configuration) and must render even if the calculation did not
	// change.
	renderNeeded bool

	// natPools are the IP pools (for NAT outgoing), localWEPs this
	// node's workload endpoints by calc key.
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
}

// pendingChange is the latest change of one of the calculation's
// resources: its new version, or deleted.
type pendingChange struct {
	obj     v3.Resource
	deleted bool
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
	d := &Daemon{cfg: cfg, log: cfg.Logger, pending: map[datastore.Key]pendingChange{},
		pools: map[string]*v3.IPPool{}, nodes: map[string]*v3.Node{},
		problems: map[calc.Problem]bool{}, unrenderable: map[calc.Unrenderable]bool{}, dirty: make(chan struct{}, 1),
		engine: calc.NewEngine(cfg.NodeName), localWEPs: map[string]*v3.WorkloadEndpoint{}}
	d.setRulesConfig(cfg.Rules)
	return d
}

func (d *Daemon) setRulesConfig(rc rules.Config) {
	d.rulesCfg = rc
	d.renderers = nil
	d.renderNeeded = true
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

// OnSnapshotSize implements datastore.SnapshotSizer: the calculation
// makes room for the snapshot before it is fed.
func (d *Daemon) OnSnapshotSize(kind string, n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sizes == nil {
		d.sizes = map[string]int{}
	}
	d.sizes[kind] += n
}

// OnUpdates implements datastore.SyncerCallbacks. It only records what
// changed (the latest change per key); Recompute feeds it to the
// calculation.
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
		deleted := u.Type == datastore.EventDeleted
		switch u.Key.Kind {
		case v3.KindIPAMBlock:
			continue // the route manager's only
		case v3.KindIPPool:
			setOrDelete(d.pools, u.Key.Name, u.Object, deleted)
			d.infraChanged = true
		case v3.KindNode:
			setOrDelete(d.nodes, u.Key.Name, u.Object, deleted)
			d.infraChanged = true
		case v3.KindFelixConfiguration:
			var spec *v3.FelixConfigurationSpec
			if fc, ok := u.Object.(*v3.FelixConfiguration); ok && !deleted {
				spec = &fc.Spec
			}
			switch u.Key.Name {
			case "default":
				d.global = spec
			case v3.FelixConfigurationNamePrefix + d.cfg.NodeName:
				d.node = spec
			default:
				continue // another node's
			}
			d.infraChanged = true
		default:
			d.pending[u.Key] = pendingChange{obj: u.Object, deleted: deleted}
		}
		policy = true
	}
	d.mu.Unlock()
	if policy {
		d.kick()
	}
}

// setOrDelete keeps o (of type T) under name, or removes it.
func setOrDelete[T any](m map[string]*T, name string, o v3.Resource, deleted bool) {
	if t, ok := any(o).(*T); ok && !deleted {
		m[name] = t
	} else {
		delete(m, name)
	}
}

func (d *Daemon) kick() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// changes takes the calculation's resources changed since the last call
// and, when they changed, the rendering inputs outside it (infra is
// nil otherwise); ok is false before the first full snapshot (the
// changes so far are handed out to be loaded, infra waits).
func (d *Daemon) changes() (changes map[datastore.Key]pendingChange, infra *infraInput, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	// Hand out the pending map only when it holds something, and start a
	// new one: the caller reads it without the lock while OnUpdates goes
	// on writing into d.pending. Before the first full snapshot the
	// changes so far are handed out too (ok false): the calculation takes
	// them while the rest of the snapshot is read.
	if len(d.pending) > 0 {
		changes = d.pending
		d.pending = map[datastore.Key]pendingChange{}
	}
	if !d.inSync {
		return changes, nil, false
	}
	if d.infraChanged {
		d.infraChanged = false
		infra = &infraInput{global: d.global, node: d.node}
		for _, name := range slices.Sorted(maps.Keys(d.pools)) {
			infra.pools = append(infra.pools, d.pools[name])
		}
		for _, name := range slices.Sorted(maps.Keys(d.nodes)) {
			infra.nodes = append(infra.nodes, d.nodes[name])
		}
	}
	return changes, infra, true
}

// infraInput is what the rendering takes from outside the calculation.
type infraInput struct {
	pools        []*v3.IPPool
	nodes        []*v3.Node
	global, node *v3.FelixConfigurationSpec
}

// natAndTunnels derives NAT outgoing's pools and the tunnel rules' input
// from the IP pools and nodes.
func natAndTunnels(pools []*v3.IPPool, nodes []*v3.Node) (nat []rules.NATPool, tunnels rules.TunnelConfig) {
	for _, o := range pools {
		cidr, err := netip.ParsePrefix(o.Spec.CIDR)
		if err != nil {
			continue
		}
		nat = append(nat, rules.NATPool{CIDR: cidr, NATOutgoing: o.Spec.NATOutgoing})
		tunnels.IPIP = tunnels.IPIP || (cidr.Addr().Is4() && (o.Spec.IPIPMode == v3.IPIPModeAlways || o.Spec.IPIPMode == v3.IPIPModeCrossSubnet))
		tunnels.VXLAN = tunnels.VXLAN || o.Spec.VXLANMode == v3.VXLANModeAlways || o.Spec.VXLANMode == v3.VXLANModeCrossSubnet
	}
	for _, o := range nodes {
		if o.Spec.BGP == nil {
			continue
		}
		for _, s := range []string{o.Spec.BGP.IPv4Address, o.Spec.BGP.IPv6Address} {
			p, err := netip.ParsePrefix(s)
			if err != nil {
				continue
			}
			tunnels.AllHosts = append(tunnels.AllHosts, p.Addr())
			if (p.Addr().Is4() && o.Spec.IPv4VXLANTunnelAddr != "") || (p.Addr().Is6() && o.Spec.IPv6VXLANTunnelAddr != "") {
				tunnels.VXLANHosts = append(tunnels.VXLANHosts, p.Addr())
			}
		}
	}
	return nat, tunnels
}

// feed hands the changed resources to the calculation and keeps the
// local workload endpoints (for endpoint status) up to date.
func (d *Daemon) feed(changes map[datastore.Key]pendingChange) {
	// Tiers and profiles first, then policies: the endpoints fed after
	// them are then derived once, not again when their tier or profile
	// comes, and evaluated against the selectors once per label set (a
	// new selector makes the remembered matches of its namespace stale).
	// A full snapshot is hundreds of thousands of endpoints.
	for _, first := range [][]string{{v3.KindTier, v3.KindProfile}, {v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy}} {
		for k, c := range changes {
			if slices.Contains(first, k.Kind) {
				d.feedOne(k, c)
				delete(changes, k)
			}
		}
	}
	for k, c := range changes {
		d.feedOne(k, c)
	}
}

func (d *Daemon) feedOne(k datastore.Key, c pendingChange) {
	if k.Kind == v3.KindWorkloadEndpoint {
		ck := k.Namespace + "/" + k.Name
		if w, ok := c.obj.(*v3.WorkloadEndpoint); ok && !c.deleted && w.Spec.Node == d.cfg.NodeName {
			d.localWEPs[ck] = w
		} else {
			delete(d.localWEPs, ck)
		}
	}
	if c.deleted || c.obj == nil {
		d.engine.DeleteKey(k.Kind, k.Namespace, k.Name)
	} else if !d.engine.Upsert(c.obj) {
		d.log.Warn("resource of a kind the calculation does not take", "key", k.String())
	}
}

// Recompute feeds the resources changed since the last call to the
// incremental calculation and hands the rendered result to the dataplane
// (nothing when nothing changed). It reports whether it computed (false
// before the first snapshot). Calls must not overlap (Run makes them one
// at a time). Objects handed to OnUpdates are replaced, never modified,
// as the calculation requires.
func (d *Daemon) Recompute() bool {
	d.mu.Lock()
	sizes := d.sizes
	d.sizes = nil
	d.mu.Unlock()
	for _, kind := range slices.Sorted(maps.Keys(sizes)) {
		d.engine.Reserve(kind, sizes[kind])
	}
	changes, infra, ok := d.changes()
	if !ok {
		// Before the first snapshot: load what came so far into the
		// calculation; it is computed once the snapshot is complete.
		d.feed(changes)
		return false
	}
	if infra != nil {
		d.natPools, d.tunnels = natAndTunnels(infra.pools, infra.nodes)
		d.renderNeeded = true
		if d.cfg.RulesConfig != nil {
			rc := d.cfg.RulesConfig(infra.global, infra.node)
			rc.HostInterfaces = d.rulesCfg.HostInterfaces
			if !reflect.DeepEqual(rc, d.rulesCfg) {
				d.log.Info("rendering configuration changed", "config", fmt.Sprintf("%+v", rc))
				d.setRulesConfig(rc)
			}
		}
	}
	start := time.Now()
	d.feed(changes)
	res, delta := d.engine.Flush()
	d.resolveHostInterfaces(res)
	if delta.Empty() && !d.renderNeeded {
		// Nothing changed (a wake-up without news, or changes that cancel
		// out): the dataplane already has this state.
		return true
	}
	d.renderNeeded = false
	var rss []*rules.Ruleset
	for _, r := range d.renderers {
		rs := rules.WithNATOutgoing(r.RenderChanges(res, delta), rules.NATConfig{Pools: d.natPools, OutgoingAddress: d.rulesCfg.NATOutgoingAddress})
		rs = rules.WithTunnelInput(rs, d.tunnels)
		rss = append(rss, rules.WithWorkloadRPF(rs, d.rulesCfg.WorkloadIfacePrefixes))
	}
	d.cfg.Dataplane.SetDesired(rss...)
	d.reportEndpoints(res)
	if delta.Problems || len(d.problems) != len(res.Problems) {
		d.noteProblems(res)
	}
	if delta.Unrenderable || len(d.unrenderable) != len(res.Unrenderable) {
		d.noteUnrenderable(res)
	}
	if m := d.cfg.Metrics; m != nil {
		took := time.Since(start).Seconds()
		m.CalcSeconds.Observe(took)
		m.CalcGraphUpdateTime.Observe(took)
		m.Problems.Set(float64(len(d.problems)))
		m.UnrenderableNow.Set(float64(len(d.unrenderable)))
		m.ActiveEndpoints.Set(float64(len(res.Endpoints)))
		m.ActivePolicies.Set(float64(len(res.Policies)))
		m.ActiveSelectors.Set(float64(len(res.IPSets)))
		e := d.engine
		d.mu.Lock()
		m.ClusterHosts.Set(float64(len(d.nodes)))
		d.mu.Unlock()
		m.ClusterWEPs.Set(float64(e.Count(v3.KindWorkloadEndpoint)))
		m.ClusterHEPs.Set(float64(e.Count(v3.KindHostEndpoint)))
		m.ClusterTiers.Set(float64(e.Count(v3.KindTier)))
		m.ClusterPolicies.Set(float64(e.Count(v3.KindNetworkPolicy) + e.Count(v3.KindGlobalNetworkPolicy)))
		m.ClusterProfiles.Set(float64(e.Count(v3.KindProfile)))
	}
	level := slog.LevelDebug
	if !d.computedOnce {
		level = slog.LevelInfo // the first snapshot: worth a line at start-up
		d.computedOnce = true
	}
	d.log.Log(context.Background(), level, "recomputed", "duration", time.Since(start), "resources", len(changes),
		"endpoints", len(res.Endpoints), "policies", len(res.Policies),
		"changedEndpoints", len(delta.Endpoints), "changedPolicies", len(delta.Policies), "changedSets", len(delta.IPSets))
	return true
}

// noteProblems logs each problem once, when it appears.
func (d *Daemon) noteProblems(res *calc.Result) {
	current := make(map[calc.Problem]bool, len(res.Problems))
	for _, p := range res.Problems {
		current[p] = true
		if !d.problems[p] {
			d.log.Warn("skipping bad input", "kind", p.Kind, "namespace", p.Namespace, "name", p.Name, "reason", p.Reason)
		}
	}
	d.problems = current
}

// noteUnrenderable logs and counts each unrenderable rule once, when it
// appears.
func (d *Daemon) noteUnrenderable(res *calc.Result) {
	unrenderable := make(map[calc.Unrenderable]bool, len(res.Unrenderable))
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
	var churn churnDetector
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
		// Coalesce a burst of updates into one computation; under
		// sustained churn, batch more (each computation that changes
		// something costs a kernel update: an iptables restore for a policy).
		wait := max(d.cfg.Debounce, time.Until(lastEnd.Add(lastTook)))
		if churn.busy(time.Now()) {
			wait = max(wait, time.Until(lastEnd.Add(churnSpacing)))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
		start := time.Now()
		d.cfg.Health.Begin()
		computed := d.Recompute()
		d.cfg.Health.End()
		lastEnd = time.Now()
		lastTook = lastEnd.Sub(start)
		if computed {
			churn.note(start)
		} else {
			lastTook = 0 // loading the first snapshot: go on at once, and it is no churn
		}
	}
}

// Sustained churn: at least churnCount computations within churnWindow
// (over 40 a second, while isolated changes come at most every few tens
// of milliseconds); the next computation then starts no earlier than
// churnSpacing after the last one ended, so a change waits at most that
// much longer and the kernel is updated at most ~40 times a second.
const (
	churnCount   = 8
	churnWindow  = 200 * time.Millisecond
	churnSpacing = 25 * time.Millisecond
)

// churnDetector remembers when the last computations started.
type churnDetector struct {
	starts [churnCount]time.Time
	next   int
}

func (c *churnDetector) note(t time.Time) {
	c.starts[c.next] = t
	c.next = (c.next + 1) % churnCount
}

// busy says whether the last churnCount computations all started within
// churnWindow before now.
func (c *churnDetector) busy(now time.Time) bool {
	oldest := c.starts[c.next]
	return !oldest.IsZero() && now.Sub(oldest) < churnWindow
}
