package ipamgc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Pods says whether a Kubernetes pod exists. An answer of false must be
// authoritative (a live read, not only a cache that may lag).
type Pods interface {
	Exists(ctx context.Context, namespace, name string) (bool, error)
}

// Config wires a GC.
type Config struct {
	Client    datastore.Client
	Allocator *ipam.Allocator
	// Grace is the leak grace period (0: leaks are not collected, only
	// what deleted nodes held).
	Grace time.Duration
	// Pods, set in etcd mode, makes each pass also delete the
	// WorkloadEndpoints of Kubernetes pods that have been gone for the
	// grace period (a pod deleted while its node was down never had its
	// CNI DEL): their addresses are then leaks, released in the same
	// pass. In Kubernetes mode endpoints are the pods themselves.
	Pods    Pods
	Now     func() time.Time
	Logger  *slog.Logger
	Metrics *Metrics
}

// GC runs passes. Not safe for concurrent passes (one loop owns it).
type GC struct {
	cfg     Config
	tracker *Tracker
	log     *slog.Logger
}

// New returns a GC.
func New(cfg Config) *GC {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	return &GC{cfg: cfg, tracker: NewTracker(), log: cfg.Logger}
}

// Result is what one pass did.
type Result struct {
	Candidates       int // leaks and other candidates waiting out the grace period
	Released         []ipam.Leak
	DeletedEndpoints []string // namespace/name
	ReleasedNodes    []string
}

func podKey(ns, pod string, ip netip.Addr) string { return "pod/" + ns + "/" + pod + "/" + ip.String() }

func leakKey(l ipam.Leak) string {
	if l.Namespace != "" && l.Pod != "" {
		return podKey(l.Namespace, l.Pod, l.IP)
	}
	return "node/" + l.Node + "/" + l.IP.String() + "/" + l.Handle
}

// Pass runs one collection: judge, wait out the grace period, release.
func (g *GC) Pass(ctx context.Context) (Result, error) {
	start := time.Now()
	res, err := g.pass(ctx)
	g.cfg.Metrics.passSeconds.Observe(time.Since(start).Seconds())
	if err != nil {
		g.cfg.Metrics.failures.Inc()
	}
	return res, err
}

func (g *GC) pass(ctx context.Context) (Result, error) {
	var res Result
	now := g.cfg.Now()
	var keys []string
	var errs []error

	if g.cfg.Pods != nil {
		k, deleted, err := g.staleEndpoints(ctx, now)
		if err != nil {
			return res, err
		}
		keys = append(keys, k...)
		res.DeletedEndpoints = deleted
	}

	rep, err := g.cfg.Allocator.CheckLeaks(ctx, 0)
	if err != nil {
		return res, fmt.Errorf("IPAM leak check: %w", err)
	}
	for _, l := range rep.Leaks {
		keys = append(keys, leakKey(l))
	}
	for _, b := range rep.EmptyUnaffineBlocks {
		keys = append(keys, "block/"+b.String())
	}
	for _, a := range rep.StaleAffinities {
		keys = append(keys, "affinity/"+a)
	}
	for _, h := range rep.OrphanHandles {
		keys = append(keys, "handle/"+h)
	}
	g.tracker.Observe(now, keys)

	grace := g.cfg.Grace
	dead := map[string]bool{}
	for _, n := range rep.DeadNodes {
		dead[n] = true
	}
	release := &ipam.GCReport{DeadNodes: rep.DeadNodes}
	for _, l := range rep.Leaks {
		// What a deleted node held is reclaimed at once (its pods are
		// gone too: ReleaseLeaks re-checks each owner).
		if dead[l.Node] || g.tracker.Confirmed(leakKey(l), now, grace) {
			release.Leaks = append(release.Leaks, l)
		}
	}
	for _, b := range rep.EmptyUnaffineBlocks {
		if g.tracker.Confirmed("block/"+b.String(), now, grace) {
			release.EmptyUnaffineBlocks = append(release.EmptyUnaffineBlocks, b)
		}
	}
	for _, a := range rep.StaleAffinities {
		if g.tracker.Confirmed("affinity/"+a, now, grace) {
			release.StaleAffinities = append(release.StaleAffinities, a)
		}
	}
	for _, h := range rep.OrphanHandles {
		if g.tracker.Confirmed("handle/"+h, now, grace) {
			release.OrphanHandles = append(release.OrphanHandles, h)
		}
	}
	g.cfg.Metrics.setCandidates(rep.Leaks, g.tracker)

	if len(release.Leaks)+len(release.DeadNodes)+len(release.EmptyUnaffineBlocks)+len(release.StaleAffinities)+len(release.OrphanHandles) == 0 {
		res.Candidates = g.tracker.Len()
		return res, errors.Join(errs...)
	}
	freed, err := g.cfg.Allocator.ReleaseLeaks(ctx, release)
	if err != nil {
		errs = append(errs, fmt.Errorf("releasing leaks: %w", err))
	}
	for _, l := range freed {
		g.tracker.Forget(leakKey(l))
		g.cfg.Metrics.reclamations.WithLabelValues(l.Node).Inc()
		g.log.Info("reclaimed leaked address", "ip", l.IP, "handle", l.Handle, "pod", l.Namespace+"/"+l.Pod, "node", l.Node, "reason", l.Reason)
	}
	for _, b := range release.EmptyUnaffineBlocks {
		g.tracker.Forget("block/" + b.String())
	}
	for _, a := range release.StaleAffinities {
		g.tracker.Forget("affinity/" + a)
	}
	for _, h := range release.OrphanHandles {
		g.tracker.Forget("handle/" + h)
	}
	res.Released = freed
	res.ReleasedNodes = release.DeadNodes
	res.Candidates = g.tracker.Len()
	return res, errors.Join(errs...)
}

// staleEndpoints (etcd mode) returns the candidate keys of Kubernetes
// WorkloadEndpoints whose pod is gone, and deletes those gone for the
// grace period (conditional on the endpoint not having changed).
func (g *GC) staleEndpoints(ctx context.Context, now time.Time) ([]string, []string, error) {
	l, err := g.cfg.Client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err == nil {
		err = l.Complete()
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing workload endpoints: %w", err)
	}
	var keys, deleted []string
	for _, r := range l.Items {
		w := r.(*v3.WorkloadEndpoint)
		if w.Spec.Orchestrator != "k8s" || w.Spec.Pod == "" {
			continue
		}
		ok, err := g.cfg.Pods.Exists(ctx, w.Namespace, w.Spec.Pod)
		if err != nil {
			return nil, nil, fmt.Errorf("looking up pod %s/%s: %w", w.Namespace, w.Spec.Pod, err)
		}
		if ok {
			continue
		}
		wk := "wep/" + w.Namespace + "/" + w.Name
		var ips []netip.Addr
		for _, n := range w.Spec.IPNetworks {
			if p, err := netip.ParsePrefix(n); err == nil {
				ips = append(ips, p.Addr())
			} else if a, err := netip.ParseAddr(n); err == nil {
				ips = append(ips, a)
			}
		}
		confirmed := g.tracker.Confirmed(wk, now, g.cfg.Grace)
		keys = append(keys, wk)
		for _, ip := range ips {
			keys = append(keys, podKey(w.Namespace, w.Spec.Pod, ip))
		}
		if !confirmed {
			continue
		}
		_, err = g.cfg.Client.Delete(ctx, datastore.KeyOf(w), datastore.DeleteOptions{ResourceVersion: w.ResourceVersion})
		switch {
		case err == nil:
			deleted = append(deleted, w.Namespace+"/"+w.Name)
			g.log.Info("deleted the workload endpoint of a pod that no longer exists", "endpoint", w.Namespace+"/"+w.Name, "pod", w.Spec.Pod)
		case errors.Is(err, datastore.ErrNotFound), errors.Is(err, datastore.ErrConflict):
		default:
			return keys, deleted, fmt.Errorf("deleting stale workload endpoint %s/%s: %w", w.Namespace, w.Name, err)
		}
	}
	slices.Sort(deleted)
	return keys, deleted, nil
}

// Metrics of the GC. Names as Calico's kube-controllers where Calico has
// them (ipam_allocations_gc_candidates, ipam_allocations_gc_reclamations).
type Metrics struct {
	candidates   *prometheus.GaugeVec
	reclamations *prometheus.CounterVec
	passSeconds  prometheus.Histogram
	failures     prometheus.Counter
}

// NewMetrics makes the GC metrics and registers them with reg (nil: not
// registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		candidates: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "ipam_allocations_gc_candidates",
			Help: "Addresses that look leaked and wait out the leak grace period, per node."}, []string{"node"}),
		reclamations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "ipam_allocations_gc_reclamations",
			Help: "Leaked addresses reclaimed, per node."}, []string{"node"}),
		passSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "kube_controllers_ipam_gc_pass_seconds",
			Help: "Duration of an IPAM garbage collection pass.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 14)}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "kube_controllers_ipam_gc_failures_total",
			Help: "IPAM garbage collection passes that failed (retried with backoff)."}),
	}
	if reg != nil {
		reg.MustRegister(m.candidates, m.reclamations, m.passSeconds, m.failures)
	}
	return m
}

func (m *Metrics) setCandidates(leaks []ipam.Leak, t *Tracker) {
	per := map[string]float64{}
	for _, l := range leaks {
		if _, ok := t.since[leakKey(l)]; ok {
			per[l.Node]++
		}
	}
	m.candidates.Reset()
	for n, c := range per {
		m.candidates.WithLabelValues(n).Set(c)
	}
}
