// Package daemon wires felix together: a datastore syncer's updates and
// the node's interface addresses (from a watcher) are fed (coalesced,
// only what changed) to the incremental calculation (calc.Engine, whose
// work is proportional to what changed) and to the one reading of the
// cluster's Nodes and IP pools (infra.Derive), which the rules and the
// route manager share; the result is rendered for each IP version and
// handed to the dataplane, which reconciles the kernel in its own loop.
// Nothing is programmed before the syncer has delivered a complete
// snapshot. A computation does no I/O: everything it uses arrives as an
// input.
package daemon

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/health"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/felix/rules"
)

// levelTrace is Calico's TRACE severity (below DEBUG).
const levelTrace = slog.Level(-8)

// Kinds are the resource kinds felix watches: the policy path's, the
// Nodes and IP pools (read once, for rules and routes) and the route
// manager's own (routes.Kinds, handed to Config.Routes).
var Kinds = append([]string{
	v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy,
	v3.KindTier, v3.KindProfile, v3.KindNetworkSet, v3.KindGlobalNetworkSet, v3.KindFelixConfiguration,
	v3.KindNode, v3.KindIPPool,
}, routes.Kinds...)

// Dataplane is what the daemon needs of dataplane.Dataplane: rulesets in,
// its reconciling loop, and the generation (number of SetDesired calls)
// of the last rulesets handed over, which endpoint status reports.
type Dataplane interface {
	SetDesired(rulesets ...*rules.Ruleset)
	Run(ctx context.Context) error
	Generation() uint64
}

// EndpointStatusReporter is what the daemon needs of epstatus.Reporter.
type EndpointStatusReporter interface {
	Desired(gen uint64, names []string)
}

// RouteManager is what the daemon needs of routes.Manager: the route
// manager's kinds (routes.Kinds) and this node's WorkloadEndpoints, the
// sync status, and the cluster as the daemon reads it.
type RouteManager interface {
	datastore.SyncerCallbacks
	SetCluster(*infra.Cluster)
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
	// together (default 1ms: the events of one watch response arrive
	// within microseconds of each other; every millisecond more is added
	// to an isolated change's latency); see pacer.
	Debounce time.Duration
	// HeartbeatInterval is the longest Run's loop goes without a turn
	// (and a Heartbeat) [default 10s].
	HeartbeatInterval time.Duration
	Logger            *slog.Logger
	// Metrics, if set, records calculations and bad input.
	Metrics *Metrics
	// Health, if set, is told when each computation starts and ends (a
	// computation that never ends fails liveness).
	Health *health.Loop
	// EndpointStatus, if set, is told after each computation which local
	// workload endpoints (by status file name) the ruleset generation
	// handed to the Dataplane holds.
	EndpointStatus EndpointStatusReporter
	// Report, if set, keeps the endpoint report (see report.go): told
	// each generation's endpoints and policy versions here, the applied
	// generation by the dataplane (Reporter.Applied).
	Report *Reporter
	// Routes, if set, receives the sync status, the updates of the route
	// manager's kinds, and the cluster's infrastructure.
	Routes RouteManager
	// Heartbeat, if set, is called on every turn of Run's loop, at least
	// every HeartbeatInterval: a stuck computation stops it.
	Heartbeat func()
	// FollowServices: the syncer delivers Kubernetes EndpointSlices
	// (v3.KindKubernetesEndpointSlice), and rules' services matches select
	// their Services' endpoints (see FollowsServices). Unset, such rules
	// fail closed.
	FollowServices bool
}

// Daemon is felix's policy pipeline. Its callbacks (syncer, interface
// addresses) may be called from any goroutine; Recompute is called by
// Run, one at a time; Run owns every goroutine it starts.
type Daemon struct {
	cfg Config
	log *slog.Logger

	mu     sync.Mutex
	inSync bool
	// in is what arrived since the last computation (under mu).
	in intake

	// Used only by Recompute (one at a time).
	calc calcState
	// dirty wakes Run's loop.
	dirty chan struct{}
	// resyncCounted: the first resync has been counted.
	resyncCounted bool
}

// New returns a Daemon.
func New(cfg Config) *Daemon {
	if len(cfg.IPVersions) == 0 {
		cfg.IPVersions = []int{4}
	}
	if cfg.Debounce == 0 {
		cfg.Debounce = time.Millisecond
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	d := &Daemon{cfg: cfg, log: cfg.Logger, in: newIntake(), dirty: make(chan struct{}, 1)}
	d.calc = newCalcState(cfg)
	return d
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
	d.in.sizes[kind] += n
}

// OnUpdates implements datastore.SyncerCallbacks. It only records what
// changed (the latest change per key); Recompute takes it.
func (d *Daemon) OnUpdates(ups []datastore.Update) {
	if d.cfg.Routes != nil {
		d.cfg.Routes.OnUpdates(ups)
	}
	if d.log.Enabled(context.Background(), levelTrace) {
		for _, u := range ups {
			d.log.Log(context.Background(), levelTrace, "datastore update", "key", u.Key.String(), "type", u.Type)
		}
	}
	d.mu.Lock()
	changed := d.in.add(ups, d.cfg.NodeName)
	d.mu.Unlock()
	if changed {
		d.kick()
	}
}

// OnHostInterfaces takes the node's interfaces and their addresses (the
// whole set, from an address watcher); the calculation uses them when a
// local host endpoint is given by expectedIPs only. ifaces must not be
// modified afterwards.
func (d *Daemon) OnHostInterfaces(ifaces map[string][]netip.Addr) {
	d.mu.Lock()
	d.in.ifaces, d.in.ifacesChanged = ifaces, true
	d.mu.Unlock()
	d.kick()
}

func (d *Daemon) kick() {
	select {
	case d.dirty <- struct{}{}:
	default:
	}
}

// take hands out what arrived since the last call (see intake.take).
func (d *Daemon) take() (taken, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.in.take(d.inSync)
}

// Run starts the dataplane loop and the syncer (when given) and recomputes
// on every change until ctx ends. It returns after all its goroutines have
// stopped.
func (d *Daemon) Run(ctx context.Context, syncer datastore.Syncer) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	dpErr := make(chan error, 1)
	wg.Go(func() { dpErr <- d.cfg.Dataplane.Run(ctx) })
	if syncer != nil {
		wg.Go(func() { syncer.Run(ctx) })
	}
	defer wg.Wait()
	heartbeat := time.NewTicker(d.cfg.HeartbeatInterval)
	defer heartbeat.Stop()
	p := &pacer{debounce: d.cfg.Debounce}
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
		case <-heartbeat.C:
			continue
		case <-d.dirty:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(p.wait(time.Now())):
		}
		start := time.Now()
		d.cfg.Health.Begin()
		computed := d.Recompute()
		d.cfg.Health.End()
		p.done(start, time.Now(), computed)
	}
}
