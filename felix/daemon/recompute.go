package daemon

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"reflect"
	"slices"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/epstatus"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/rules"
)

// calcState is what the computations keep between turns; only Recompute
// (one at a time) uses it.
type calcState struct {
	// engine is the incremental calculation; renderers the renderers'
	// memory of unchanged chains, made for rulesCfg.
	engine    *calc.Engine
	renderers []*rules.Renderer
	rulesCfg  rules.Config
	// renderNeeded: the renderers are new (first computation, changed
	// configuration) or the rules outside the calculation changed: render
	// even if the calculation did not change.
	renderNeeded bool

	// cluster is the last reading of Nodes and IP pools, and what the
	// rendering takes from it.
	cluster  *infra.Cluster
	natPools []rules.NATPool
	tunnels  rules.TunnelConfig
	// ifaces are the interface addresses last reported (ifacesKnown: by
	// a watcher at all).
	ifaces      map[string][]netip.Addr
	ifacesKnown bool
	// localWEPs are this node's workload endpoints by calc key (for
	// endpoint status).
	localWEPs map[string]*v3.WorkloadEndpoint
	// report is the endpoint report's side of the computation.
	report reportState

	// The problems of the last computation, each logged (and counted)
	// once, when it appears.
	problems      map[calc.Problem]bool
	unrenderable  map[calc.Unrenderable]bool
	infraProblems map[infra.Problem]bool
	// computedOnce: the first snapshot has been computed (logged at Info).
	computedOnce bool
	// warnedIfaces: the missing address watcher has been logged.
	warnedIfaces bool
}

func newCalcState(cfg Config) calcState {
	c := calcState{engine: calc.NewEngine(cfg.NodeName), localWEPs: map[string]*v3.WorkloadEndpoint{},
		problems: map[calc.Problem]bool{}, unrenderable: map[calc.Unrenderable]bool{}, infraProblems: map[infra.Problem]bool{}}
	if cfg.FollowServices {
		c.engine.FollowServices()
	}
	c.setRulesConfig(cfg.Rules, cfg.IPVersions)
	return c
}

func (c *calcState) setRulesConfig(rc rules.Config, versions []int) {
	c.rulesCfg = rc
	c.renderers = nil
	c.renderNeeded = true
	for _, v := range versions {
		c.renderers = append(c.renderers, rules.NewRenderer(rc, v))
	}
}

// Recompute feeds what changed since the last call to the calculation
// and hands the rendered result to the dataplane (nothing when nothing
// changed). It reports whether it computed (false before the first
// snapshot). Calls must not overlap (Run makes them one at a time).
// Objects handed to OnUpdates are replaced, never modified, as the
// calculation requires.
func (d *Daemon) Recompute() bool {
	t, ok := d.take()
	for _, kind := range slices.Sorted(maps.Keys(t.sizes)) {
		d.calc.engine.Reserve(kind, t.sizes[kind])
	}
	if !ok {
		// Before the first snapshot: load what came so far into the
		// calculation; it is computed once the snapshot is complete.
		d.feed(t.changes)
		return false
	}
	start := time.Now()
	d.applyCluster(t)
	d.applyConfig(t)
	n := len(t.changes)
	d.feed(t.changes)
	res, delta := d.calc.engine.Flush()
	d.applyHostInterfaces(res, t)
	if delta.Empty() && !d.calc.renderNeeded {
		// Nothing changed (a wake-up without news, or changes that cancel
		// out): the dataplane already has this state, resources read
		// (that apply to no local endpoint) included.
		if r := d.cfg.Report; r != nil && d.calc.report.changed {
			r.resourcesRead(d.cfg.Dataplane.Generation(), d.calc.report.handOut())
		}
		return true
	}
	d.render(res, delta)
	d.noteProblems(res, delta)
	d.recordMetrics(res, start)
	d.logComputation(res, delta, n, start)
	return true
}

// applyCluster reads the Nodes and IP pools when they changed and, if
// what felix derives from them changed too, hands it on: NAT outgoing's
// pools and the tunnel rules for the rendering, and the route manager's
// cluster (the same reading).
func (d *Daemon) applyCluster(t taken) {
	if !t.clusterChanged {
		return
	}
	c := infra.Derive(t.pools, t.nodes)
	if d.calc.cluster != nil && reflect.DeepEqual(c, d.calc.cluster) {
		// A Node or pool changed in what felix does not read (a label, an
		// AS number): nothing to render or route again.
		return
	}
	d.calc.cluster = c
	d.calc.natPools, d.calc.tunnels = rulesInfra(c)
	d.calc.renderNeeded = true
	d.noteInfraProblems(c)
	if d.cfg.Routes != nil {
		d.cfg.Routes.SetCluster(c)
	}
}

// rulesInfra is what the rendering takes from the cluster: NAT
// outgoing's pools and the tunnel rules' input.
func rulesInfra(c *infra.Cluster) (nat []rules.NATPool, tunnels rules.TunnelConfig) {
	for _, p := range c.Pools {
		nat = append(nat, rules.NATPool{CIDR: p.CIDR, NATOutgoing: p.NATOutgoing})
	}
	tunnels.IPIP = c.UsesIPIP()
	tunnels.VXLAN = c.UsesVXLAN(nil)
	tunnels.AllHosts = c.AllHosts()
	tunnels.VXLANHosts = c.VXLANHosts()
	return nat, tunnels
}

// noteInfraProblems logs and counts each unreadable Node or IP pool field
// once, when it appears.
func (d *Daemon) noteInfraProblems(c *infra.Cluster) {
	current := make(map[infra.Problem]bool, len(c.Problems))
	for _, p := range c.Problems {
		current[p] = true
		if d.calc.infraProblems[p] {
			continue
		}
		d.log.Warn("cannot read a field of the cluster's infrastructure; leaving it out",
			"kind", p.Kind, "name", p.Name, "field", p.Field, "value", p.Value, "reason", p.Reason)
		if m := d.cfg.Metrics; m != nil {
			m.InfraBadInput.WithLabelValues(p.Kind, p.Field).Inc()
		}
	}
	d.calc.infraProblems = current
	if m := d.cfg.Metrics; m != nil {
		m.InfraBadInputNow.Set(float64(len(current)))
	}
}

// applyConfig derives the rendering configuration from the
// FelixConfigurations when they changed; the renderers are replaced only
// when it differs.
func (d *Daemon) applyConfig(t taken) {
	if !t.configChanged || d.cfg.RulesConfig == nil {
		return
	}
	rc := d.cfg.RulesConfig(t.global, t.node)
	rc.HostInterfaces = d.calc.rulesCfg.HostInterfaces
	if reflect.DeepEqual(rc, d.calc.rulesCfg) {
		// (After RulesConfig: a change of log level applies to this line.)
		d.log.Debug("FelixConfiguration changed; the rendering configuration did not")
		return
	}
	d.log.Info("rendering configuration changed", "config", fmt.Sprintf("%+v", rc))
	d.calc.setRulesConfig(rc, d.cfg.IPVersions)
}

// applyHostInterfaces renders with the node's interface addresses while a
// local host endpoint is given by expectedIPs only (and without them
// otherwise, so that addresses coming and going elsewhere, such as a new
// pod's link-local address, cost nothing); the renderers are replaced
// only when what they render with changed.
func (d *Daemon) applyHostInterfaces(res *calc.Result, t taken) {
	if t.ifacesChanged {
		d.calc.ifaces, d.calc.ifacesKnown = t.ifaces, true
	}
	var ifaces map[string][]netip.Addr
	if slices.ContainsFunc(res.Endpoints, func(ep calc.Endpoint) bool { return ep.Kind == calc.Host && ep.Interface == "" }) {
		ifaces = d.calc.ifaces
		if !d.calc.ifacesKnown && !d.calc.warnedIfaces {
			d.calc.warnedIfaces = true
			d.log.Warn("host endpoints by expectedIPs need the node's interface addresses, which no address watcher has reported yet")
		}
	}
	if !reflect.DeepEqual(ifaces, d.calc.rulesCfg.HostInterfaces) {
		rc := d.calc.rulesCfg
		rc.HostInterfaces = ifaces
		d.log.Info("host interface addresses changed", "interfaces", fmt.Sprint(ifaces))
		d.calc.setRulesConfig(rc, d.cfg.IPVersions)
	}
}

// feed hands the changed resources to the calculation and keeps the
// local workload endpoints (for endpoint status) up to date. It empties
// changes.
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
		delete(changes, k)
	}
}

func (d *Daemon) feedOne(k datastore.Key, c pendingChange) {
	if k.Kind == v3.KindWorkloadEndpoint {
		ck := k.Namespace + "/" + k.Name
		if w, ok := c.obj.(*v3.WorkloadEndpoint); ok && !c.deleted && w.Spec.Node == d.cfg.NodeName {
			d.calc.localWEPs[ck] = w
		} else {
			delete(d.calc.localWEPs, ck)
		}
	}
	if d.cfg.Report != nil {
		d.calc.report.noteResource(k, c)
	}
	if c.deleted || c.obj == nil {
		d.calc.engine.DeleteKey(k.Kind, k.Namespace, k.Name)
	} else if !d.calc.engine.Upsert(c.obj) {
		d.log.Warn("resource of a kind the calculation does not take", "key", k.String())
	}
}

// render renders the result for each IP version with the rules outside
// the calculation (NAT outgoing, tunnel acceptance, workload RPF), hands
// the rulesets to the dataplane and tells endpoint status what they hold.
func (d *Daemon) render(res *calc.Result, delta *calc.Delta) {
	c := &d.calc
	c.renderNeeded = false
	var rss []*rules.Ruleset
	for _, r := range c.renderers {
		rs := rules.WithNATOutgoing(r.RenderChanges(res, delta), rules.NATConfig{Pools: c.natPools, OutgoingAddress: c.rulesCfg.NATOutgoingAddress})
		rs = rules.WithWorkloadRPF(rs, c.rulesCfg.WorkloadIfacePrefixes)
		rs = rules.WithWireguard(rs, c.rulesCfg.Wireguard, c.rulesCfg.WorkloadIfacePrefixes)
		rss = append(rss, rules.WithTunnelInput(rs, c.tunnels))
	}
	if d.cfg.Report != nil {
		// Before the dataplane can apply it: the generation SetDesired
		// makes (Recompute is its only caller).
		d.cfg.Report.desired(d.cfg.Dataplane.Generation()+1, c.report.generation(res, delta))
	}
	d.cfg.Dataplane.SetDesired(rss...)
	if d.cfg.EndpointStatus == nil {
		return
	}
	var names []string
	for _, ep := range res.Endpoints {
		if w := c.localWEPs[ep.Key]; ep.Kind == calc.Workload && w != nil {
			names = append(names, epstatus.Filename(w))
		}
	}
	d.cfg.EndpointStatus.Desired(d.cfg.Dataplane.Generation(), names)
}

// noteProblems logs each bad input once, and logs and counts each
// unrenderable rule once, when it appears.
func (d *Daemon) noteProblems(res *calc.Result, delta *calc.Delta) {
	c := &d.calc
	if delta.Problems || len(c.problems) != len(res.Problems) {
		current := make(map[calc.Problem]bool, len(res.Problems))
		for _, p := range res.Problems {
			current[p] = true
			if !c.problems[p] {
				d.log.Warn("skipping bad input", "kind", p.Kind, "namespace", p.Namespace, "name", p.Name, "reason", p.Reason)
			}
		}
		c.problems = current
	}
	if !delta.Unrenderable && len(c.unrenderable) == len(res.Unrenderable) {
		return
	}
	unrenderable := make(map[calc.Unrenderable]bool, len(res.Unrenderable))
	for _, u := range res.Unrenderable {
		unrenderable[u] = true
		if c.unrenderable[u] {
			continue
		}
		d.log.Warn("rule cannot be enforced as written; enforcing it fail-closed",
			"kind", u.Kind, "namespace", u.Namespace, "name", u.Name, "direction", u.Direction, "rule", u.Rule,
			"action", u.Action, "handling", u.Handling, "reason", u.Reason, "detail", u.Detail)
		if m := d.cfg.Metrics; m != nil {
			m.Unrenderable.WithLabelValues(string(u.Handling), u.Reason).Inc()
		}
	}
	c.unrenderable = unrenderable
}

// recordMetrics records a computation that started at start.
func (d *Daemon) recordMetrics(res *calc.Result, start time.Time) {
	m := d.cfg.Metrics
	if m == nil {
		return
	}
	c := &d.calc
	took := time.Since(start).Seconds()
	m.CalcSeconds.Observe(took)
	m.CalcGraphUpdateTime.Observe(took)
	m.Problems.Set(float64(len(c.problems)))
	m.UnrenderableNow.Set(float64(len(c.unrenderable)))
	m.ActiveEndpoints.Set(float64(len(res.Endpoints)))
	m.ActivePolicies.Set(float64(len(res.Policies)))
	m.ActiveSelectors.Set(float64(len(res.IPSets)))
	if c.cluster != nil {
		m.ClusterHosts.Set(float64(len(c.cluster.Nodes)))
	}
	e := c.engine
	m.ClusterWEPs.Set(float64(e.Count(v3.KindWorkloadEndpoint)))
	m.ClusterHEPs.Set(float64(e.Count(v3.KindHostEndpoint)))
	m.ClusterTiers.Set(float64(e.Count(v3.KindTier)))
	m.ClusterPolicies.Set(float64(e.Count(v3.KindNetworkPolicy) + e.Count(v3.KindGlobalNetworkPolicy)))
	m.ClusterProfiles.Set(float64(e.Count(v3.KindProfile)))
}

// logComputation logs a computation of n changed resources (the first at
// Info: worth a line at start-up).
func (d *Daemon) logComputation(res *calc.Result, delta *calc.Delta, n int, start time.Time) {
	level := slog.LevelDebug
	if !d.calc.computedOnce {
		level = slog.LevelInfo
		d.calc.computedOnce = true
	}
	d.log.Log(context.Background(), level, "recomputed", "duration", time.Since(start), "resources", n,
		"endpoints", len(res.Endpoints), "policies", len(res.Policies),
		"changedEndpoints", len(delta.Endpoints), "changedPolicies", len(delta.Policies), "changedSets", len(delta.IPSets))
}
