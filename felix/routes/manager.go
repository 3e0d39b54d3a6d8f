package routes

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/wireguard"
)

// Kinds are the resource kinds felix watches for the route manager
// alone (Nodes and IP pools reach it as the daemon's infra.Cluster).
var Kinds = []string{v3.KindIPAMBlock}

// IsKind says whether kind is one the Manager keeps: Kinds, and the
// WorkloadEndpoints (which the policy path watches too) for local routes.
func IsKind(kind string) bool {
	return kind == v3.KindIPAMBlock || kind == v3.KindWorkloadEndpoint
}

// Applier is what the Manager needs of a Driver.
type Applier interface {
	Apply(d Desired) (Stats, error)
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	NodeName string
	Driver   Applier
	// RefreshInterval is how often the kernel is reconciled even without
	// a change, to repair drift [default 90s, Calico's RouteRefreshInterval].
	RefreshInterval time.Duration
	// MinBackoff and MaxBackoff bound the retry delay after a failure.
	MinBackoff, MaxBackoff time.Duration
	Logger                 *slog.Logger
	Metrics                *Metrics
	// Wireguard is the WireGuard configuration per IP version (IPv4,
	// IPv6), computed with the routes (Desired.Wireguard).
	Wireguard [2]wireguard.Config
}

// Metrics are the route manager's Prometheus metrics.
type Metrics struct {
	SyncSeconds prometheus.Histogram
	Failures    prometheus.Counter
	// BadInput is how many objects the last computation could not use
	// (each also logged once when it appears), as felix_calc_bad_input.
	BadInput prometheus.Gauge
	// NodeAddressMissing is 1 while this node's Node resource has no
	// address: its pods keep their routes, but it has no routes to other
	// nodes and no tunnel devices.
	NodeAddressMissing prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		SyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "felix_route_sync_seconds", Help: "Time to reconcile routes, tunnel devices and neighbours.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
		}),
		Failures: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "felix_route_sync_failures_total", Help: "Route reconciliations that failed (retried with backoff).",
		}),
		BadInput: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_route_bad_input", Help: "Nodes, blocks and pools the route calculation could not use (each logged once).",
		}),
		NodeAddressMissing: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "felix_route_node_address_missing",
			Help: "1 while this node's Node resource has no address (bgp.ipv4Address/ipv6Address): local workload routes are kept, routes to other nodes and tunnel devices wait for it.",
		}),
	}
	reg.MustRegister(m.SyncSeconds, m.Failures, m.BadInput, m.NodeAddressMissing)
	return m
}

// Manager follows IPAMBlocks and this node's WorkloadEndpoints (as a
// datastore.SyncerCallbacks, fed by the daemon's syncer) and the cluster's
// infrastructure (SetCluster, the daemon's one reading of Nodes and IP
// pools), and keeps the kernel's routes in agreement. Callbacks may come
// from any goroutine; Run owns the only goroutine that touches the kernel.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger

	mu      sync.Mutex
	objs    map[datastore.Key]v3.Resource
	inSync  bool
	cluster *infra.Cluster
	// noAddress: this node was last seen without an address (logged
	// once per change).
	noAddress *bool

	kick   chan struct{}
	synced atomic.Bool
	// everSynced: a sync has succeeded since the start.
	everSynced atomic.Bool
	// failing is the first of the current run of failed syncs and its
	// latest error (nil while syncs succeed), for Ready.
	failing  atomic.Pointer[failure]
	problems map[Problem]bool
	last     atomic.Pointer[Desired]
}

// NewManager returns a Manager; nothing is programmed before Run and the
// first complete snapshot.
func NewManager(cfg ManagerConfig) *Manager {
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = 90 * time.Second
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 100 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Manager{cfg: cfg, log: cfg.Logger, objs: map[datastore.Key]v3.Resource{}, kick: make(chan struct{}, 1), problems: map[Problem]bool{}}
}

// OnStatusUpdated implements datastore.SyncerCallbacks.
func (m *Manager) OnStatusUpdated(s datastore.SyncStatus) {
	m.mu.Lock()
	m.inSync = s == datastore.StatusInSync
	m.mu.Unlock()
	m.poke()
}

// OnUpdates implements datastore.SyncerCallbacks; kinds other than
// Kinds are ignored.
func (m *Manager) OnUpdates(ups []datastore.Update) {
	changed := false
	m.mu.Lock()
	for _, u := range ups {
		if !IsKind(u.Key.Kind) {
			continue
		}
		if w, ok := u.Object.(*v3.WorkloadEndpoint); ok && w.Spec.Node != m.cfg.NodeName {
			delete(m.objs, u.Key) // another node's (or moved away)
			continue
		}
		changed = true
		if u.Type == datastore.EventDeleted {
			delete(m.objs, u.Key)
		} else {
			m.objs[u.Key] = u.Object
		}
	}
	m.mu.Unlock()
	if changed {
		m.poke()
	}
}

// SetCluster hands the Manager the cluster's Nodes and IP pools as
// felix reads them (the daemon's derivation, shared with the policy
// path); nothing is programmed before the first.
func (m *Manager) SetCluster(c *infra.Cluster) {
	m.mu.Lock()
	m.cluster = c
	m.mu.Unlock()
	m.poke()
}

func (m *Manager) poke() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// InSync reports whether the last reconciliation succeeded.
func (m *Manager) InSync() bool { return m.synced.Load() }

// Desired is the last computed state (nil before the first).
func (m *Manager) Desired() *Desired { return m.last.Load() }

// input snapshots the cache; ok is false before the first full snapshot
// and the first cluster.
func (m *Manager) input() (Input, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := Input{ThisNode: m.cfg.NodeName, Cluster: m.cluster, Wireguard: m.cfg.Wireguard}
	if !m.inSync || m.cluster == nil {
		return in, false
	}
	for _, o := range m.objs {
		switch o := o.(type) {
		case *v3.IPAMBlock:
			in.Blocks = append(in.Blocks, o)
		case *v3.WorkloadEndpoint:
			if o.Spec.Node == m.cfg.NodeName {
				in.Workloads = append(in.Workloads, o)
			}
		}
	}
	return in, true
}

// Sync computes the desired state and applies it once; it reports
// whether there was anything to do (false before the first snapshot).
func (m *Manager) Sync() (bool, error) {
	in, ok := m.input()
	if !ok {
		return false, nil
	}
	start := time.Now()
	d, probs := Compute(in)
	m.noteProblems(probs)
	m.noteNodeAddress(in.Cluster)
	m.last.Store(&d)
	st, err := m.cfg.Driver.Apply(d)
	if mt := m.cfg.Metrics; mt != nil {
		mt.BadInput.Set(float64(len(m.problems)))
		mt.SyncSeconds.Observe(time.Since(start).Seconds())
		if err != nil {
			mt.Failures.Inc()
		}
	}
	m.synced.Store(err == nil)
	m.noteFailure(err)
	if st != (Stats{}) {
		m.log.Info("routes reconciled", "added", st.RoutesAdded, "removed", st.RoutesRemoved,
			"neighbours", st.NeighborsChanged, "devices", st.DevicesChanged, "took", time.Since(start))
	}
	return true, err
}

// failure is a run of failed syncs: since when, and the latest error.
type failure struct {
	since time.Time
	err   string
}

// noteFailure records a sync's outcome for Ready.
func (m *Manager) noteFailure(err error) {
	if err == nil {
		m.failing.Store(nil)
		m.everSynced.Store(true)
		return
	}
	f := failure{since: time.Now(), err: err.Error()}
	if old := m.failing.Load(); old != nil {
		f.since = old.since
	}
	m.failing.Store(&f)
}

// Ready is the routes' readiness at now: not ready before the first
// successful sync, nor while syncs have kept failing for longer than
// grace (a single failure retried at once is not worth a flap); the
// reason names the failing step, e.g. "creating tunl0 (does the kernel
// have ipip?): operation not supported".
func (m *Manager) Ready(now time.Time, grace time.Duration) (bool, string) {
	f := m.failing.Load()
	switch {
	case f != nil && now.Sub(f.since) >= grace:
		return false, fmt.Sprintf("route sync failing for %s: %s", now.Sub(f.since).Round(time.Second), f.err)
	case m.everSynced.Load():
		return true, ""
	case f != nil:
		return false, "routes not programmed yet; last attempt: " + f.err
	}
	return false, "routes not programmed yet"
}

// noteProblems logs each problem once, when it appears.
func (m *Manager) noteProblems(probs []Problem) {
	current := map[Problem]bool{}
	for _, p := range probs {
		current[p] = true
		if !m.problems[p] {
			m.log.Warn("routes: skipping input", "kind", p.Kind, "name", p.Name, "reason", p.Reason)
		}
	}
	m.problems = current
}

// noteNodeAddress reports (log on change, gauge) whether this node's
// Node resource has an address.
func (m *Manager) noteNodeAddress(c *infra.Cluster) {
	me, ok := c.Node(m.cfg.NodeName)
	missing := !ok || !me.HasAddress()
	if mt := m.cfg.Metrics; mt != nil {
		mt.NodeAddressMissing.Set(map[bool]float64{false: 0, true: 1}[missing])
	}
	if m.noAddress != nil && *m.noAddress == missing {
		return
	}
	m.noAddress = &missing
	if missing {
		m.log.Warn("this node's Node resource has no address (bgp.ipv4Address/ipv6Address): keeping local workload routes; no routes to other nodes and no tunnel devices until it has one",
			"node", m.cfg.NodeName, "nodeResource", ok)
	} else {
		m.log.Info("this node's address is known", "node", m.cfg.NodeName, "ipv4", me.V4.Addr, "ipv6", me.V6.Addr)
	}
}

// Run reconciles on every change, every RefreshInterval, and after a
// failure with backoff, until ctx ends.
func (m *Manager) Run(ctx context.Context) error {
	refresh := time.NewTicker(m.cfg.RefreshInterval)
	defer refresh.Stop()
	backoff := time.Duration(0)
	var retry <-chan time.Time
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-m.kick:
		case <-refresh.C:
		case <-retry:
		}
		retry = nil
		if _, err := m.Sync(); err != nil {
			backoff = min(max(2*backoff, m.cfg.MinBackoff), m.cfg.MaxBackoff)
			m.log.Warn("route sync failed; retrying", "error", err, "in", backoff)
			retry = time.After(backoff)
			continue
		}
		backoff = 0
	}
}
