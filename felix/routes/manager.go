package routes

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Kinds are the resource kinds the route manager follows.
var Kinds = []string{v3.KindNode, v3.KindIPAMBlock, v3.KindIPPool}

// IsKind says whether kind is one the Manager uses: Kinds, and the
// WorkloadEndpoints (which the policy path watches too) for local routes.
func IsKind(kind string) bool {
	return kind == v3.KindNode || kind == v3.KindIPAMBlock || kind == v3.KindIPPool || kind == v3.KindWorkloadEndpoint
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
}

// Metrics are the route manager's Prometheus metrics.
type Metrics struct {
	SyncSeconds prometheus.Histogram
	Failures    prometheus.Counter
	// BadInput is how many objects the last computation could not use
	// (each also logged once when it appears), as felix_calc_bad_input.
	BadInput prometheus.Gauge
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
	}
	reg.MustRegister(m.SyncSeconds, m.Failures, m.BadInput)
	return m
}

// Manager follows Nodes, IPAMBlocks and IPPools (as a
// datastore.SyncerCallbacks, fed by the daemon's syncer) and keeps the
// kernel's routes in agreement. Callbacks may come from any goroutine;
// Run owns the only goroutine that touches the kernel.
type Manager struct {
	cfg ManagerConfig
	log *slog.Logger

	mu     sync.Mutex
	objs   map[datastore.Key]v3.Resource
	inSync bool

	kick     chan struct{}
	synced   atomic.Bool
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

// input snapshots the cache; ok is false before the first full snapshot.
func (m *Manager) input() (Input, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	in := Input{ThisNode: m.cfg.NodeName}
	if !m.inSync {
		return in, false
	}
	for _, o := range m.objs {
		switch o := o.(type) {
		case *v3.Node:
			in.Nodes = append(in.Nodes, o)
		case *v3.IPAMBlock:
			in.Blocks = append(in.Blocks, o)
		case *v3.IPPool:
			in.Pools = append(in.Pools, o)
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
	current := map[Problem]bool{}
	for _, p := range probs {
		current[p] = true
		if !m.problems[p] {
			m.log.Warn("routes: skipping input", "kind", p.Kind, "name", p.Name, "reason", p.Reason)
		}
	}
	m.problems = current
	m.last.Store(&d)
	st, err := m.cfg.Driver.Apply(d)
	if mt := m.cfg.Metrics; mt != nil {
		mt.BadInput.Set(float64(len(current)))
		mt.SyncSeconds.Observe(time.Since(start).Seconds())
		if err != nil {
			mt.Failures.Inc()
		}
	}
	m.synced.Store(err == nil)
	if st != (Stats{}) {
		m.log.Info("routes reconciled", "added", st.RoutesAdded, "removed", st.RoutesRemoved,
			"neighbours", st.NeighborsChanged, "devices", st.DevicesChanged, "took", time.Since(start))
	}
	return true, err
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
