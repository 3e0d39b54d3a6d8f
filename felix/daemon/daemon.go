// Package daemon wires felix together: a datastore syncer feeds a resource
// cache; on every change (coalesced) the cache is turned into a
// changes fed to the incremental calculation (calc.Engine, whose work is
// proportional to what changed), rendered for each IP version and handed
// to the dataplane, which reconciles the kernel in its own loop. Nothing
// is programmed before the syncer has delivered a complete snapshot.
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
	"github.com/tabbynet/tabby/felix/rules"
)

// Kinds are the resource kinds felix's policy path watches.
var Kinds = []string{
	v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy,
	v3.KindTier, v3.KindProfile, v3.KindNetworkSet, v3.KindGlobalNetworkSet, v3.KindFelixConfiguration,
}

// Dataplane is what the daemon needs of dataplane.Dataplane.
type Dataplane interface {
	SetDesired(rulesets ...*rules.Ruleset)
	Run(ctx context.Context) error
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
}

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
	reg.MustRegister(m.CalcSeconds, m.Problems, m.Unrenderable, m.UnrenderableNow)
	return m
}

// Daemon is felix's policy pipeline. Its syncer callbacks may be called
// from any goroutine (the syncer serialises them); Run owns every goroutine
// it starts.
type Daemon struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	objs   map[datastore.Key]v3.Resource
	inSync bool
	// pending are the cache entries changed since the last computation;
	// global and node the FelixConfiguration specs (nil when absent).
	pending      map[datastore.Key]pendingChange
	global, node *v3.FelixConfigurationSpec
	problems     map[calc.Problem]bool
	// unrenderable are the last computation's unrenderable rules (each
	// logged and counted once, when it appears).
	unrenderable map[calc.Unrenderable]bool

	// Used only by Recompute (one at a time): the incremental
	// calculation, the renderers' memory of unchanged chains, and the
	// rendering configuration they were made for.
	engine *calc.Engine
	// renderNeeded: the renderers are new (first computation, changed
	// configuration) and must render even if the calculation did not
	// change.
	renderNeeded bool
	renderers    []*rules.Renderer
	rulesCfg     rules.Config

	// ipOnlyHEPs says the last computation had a local host endpoint
	// given by expectedIPs only (Run then re-reads the addresses).
	ipOnlyHEPs atomic.Bool

	dirty chan struct{}
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
		problems: map[calc.Problem]bool{}, unrenderable: map[calc.Unrenderable]bool{}, dirty: make(chan struct{}, 1),
		pending: map[datastore.Key]pendingChange{}, engine: calc.NewEngine(cfg.NodeName)}
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
	d.inSync = s == datastore.StatusInSync
	d.mu.Unlock()
	d.log.Info("datastore sync status", "status", s)
	d.kick()
}

// OnUpdates implements datastore.SyncerCallbacks.
func (d *Daemon) OnUpdates(ups []datastore.Update) {
	d.mu.Lock()
	for _, u := range ups {
		old, had := d.objs[u.Key]
		if u.Type == datastore.EventDeleted {
			if !had {
				continue
			}
			delete(d.objs, u.Key)
			d.pending[u.Key] = pendingChange{obj: old, deleted: true}
			d.noteFelixConfiguration(old, true)
		} else {
			d.objs[u.Key] = u.Object
			d.pending[u.Key] = pendingChange{obj: u.Object}
			d.noteFelixConfiguration(u.Object, false)
		}
	}
	d.mu.Unlock()
	d.kick()
}

// pendingChange is the latest change of one cache entry: its new object,
// or the last one it held when deleted.
type pendingChange struct {
	obj     v3.Resource
	deleted bool
}

// noteFelixConfiguration keeps the default and this node's
// FelixConfiguration specs. Called with mu held.
func (d *Daemon) noteFelixConfiguration(o v3.Resource, deleted bool) {
	fc, ok := o.(*v3.FelixConfiguration)
	if !ok {
		return
	}
	var spec *v3.FelixConfigurationSpec
	if !deleted {
		spec = &fc.Spec
	}
	switch fc.Name {
	case "default":
		d.global = spec
	case v3.FelixConfigurationNamePrefix + d.cfg.NodeName:
		d.node = spec
	}
}

func (d *Daemon) kick() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// takeChanges returns the cache entries changed since the last call and
// the FelixConfiguration specs; ok is false before the first full
// snapshot (the changes are then kept).
func (d *Daemon) takeChanges() (changes map[datastore.Key]pendingChange, global, node *v3.FelixConfigurationSpec, ok bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.inSync {
		return nil, nil, nil, false
	}
	changes = d.pending
	d.pending = map[datastore.Key]pendingChange{}
	return changes, d.global, d.node, true
}

// Recompute feeds the cache entries changed since the last call to the
// calculation and hands the result to the dataplane. It reports whether
// it did (false before the first snapshot). Calls must not overlap (Run
// makes them one at a time). Objects in the cache are replaced, never
// modified, on update, as the calculation requires.
func (d *Daemon) Recompute() bool {
	changes, global, node, ok := d.takeChanges()
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
	for _, c := range changes {
		if c.deleted {
			d.engine.Delete(c.obj)
		} else {
			d.engine.Upsert(c.obj) // other kinds (FelixConfiguration) are not the calculation's
		}
	}
	res, delta := d.engine.Flush()
	d.resolveHostInterfaces(res)
	if delta.Empty() && !d.renderNeeded {
		// Nothing changed (a wake-up with no new updates): the dataplane
		// already has this state.
		return true
	}
	d.renderNeeded = false
	var rss []*rules.Ruleset
	for _, r := range d.renderers {
		rss = append(rss, r.Render(res))
	}
	d.cfg.Dataplane.SetDesired(rss...)
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
	}
	d.log.Debug("recomputed", "duration", time.Since(start), "endpoints", len(res.Endpoints), "policies", len(res.Policies))
	return true
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
		d.Recompute()
		lastEnd = time.Now()
		lastTook = lastEnd.Sub(start)
	}
}
