// Package mirror holds kube-controllers' etcd-mode controllers, which keep
// Calico resources in etcd in step with Kubernetes objects, as Calico's
// do: Kubernetes NetworkPolicies as NetworkPolicies "knp.default.<name>",
// (beyond Calico) Kubernetes ClusterNetworkPolicies as GlobalNetworkPolicies
// "kcnp.<name>",
// namespaces as Profiles "kns.<namespace>", service accounts as Profiles
// "ksa.<namespace>.<name>" (conversions shared with the Kubernetes
// datastore, package kdd), and pod labels onto the pods'
// WorkloadEndpoints.
//
// Each controller is a client-go informer feeding a rate-limited work
// queue of Kubernetes keys; a worker computes the desired Calico resource
// from the informer's cache and creates, updates (compare-and-swap) or
// deletes the stored one. Every reconciler period the stored resources are
// listed and compared too, so drift made by others is repaired and what a
// deleted object left behind (while no replica led) is removed. A
// controller only touches names with its own prefix.
package mirror

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Spec describes one mirroring controller.
type Spec struct {
	// Name names the controller in logs and metrics.
	Name     string
	Informer cache.SharedIndexInformer
	// Kind is the Calico kind written.
	Kind string
	// Target is the Calico key the Kubernetes key maps to.
	Target func(k8sKey string) datastore.Key
	// Source is the Kubernetes key a stored Calico resource mirrors, ok
	// false for resources this controller does not own.
	Source func(r v3.Resource) (k8sKey string, ok bool)
	// Desired converts the Kubernetes object (from the informer's cache)
	// to the Calico resource. A conversion error with a resource is
	// written anyway (conversions only ever drop what they cannot
	// express, allowing less) and counted; an error without one is
	// retried.
	Desired func(obj any) (v3.Resource, error)
	Period  time.Duration
}

// Controller runs one Spec.
type Controller struct {
	spec    Spec
	client  datastore.Client
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
	metrics *Metrics
}

// New registers the informer handlers.
func New(spec Spec, client datastore.Client, m *Metrics, log *slog.Logger) (*Controller, error) {
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if spec.Period <= 0 {
		spec.Period = 5 * time.Minute
	}
	c := &Controller{spec: spec, client: client, metrics: m, log: log.With("controller", spec.Name),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: spec.Name})}
	_, err := spec.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueue,
		UpdateFunc: func(_, obj any) { c.enqueue(obj) },
		DeleteFunc: c.enqueue,
	})
	if err != nil {
		return nil, fmt.Errorf("%s informer: %w", spec.Name, err)
	}
	return c, nil
}

func (c *Controller) enqueue(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		c.log.Error("object without a key", "err", err)
		return
	}
	c.queue.Add(key)
}

// Run works until ctx ends; the informer must have synced.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { c.reconcileLoop(ctx) })
	for c.work(ctx) {
	}
}

// reconcileLoop queues every Kubernetes object and every owned stored
// resource, at start and then every period.
func (c *Controller) reconcileLoop(ctx context.Context) {
	t := time.NewTicker(c.spec.Period)
	defer t.Stop()
	for {
		if err := c.queueAll(ctx); err != nil && ctx.Err() == nil {
			c.metrics.failures.WithLabelValues(c.spec.Name).Inc()
			c.log.Error("listing stored resources for reconciliation (next try in one period)", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (c *Controller) queueAll(ctx context.Context) error {
	for _, k := range c.spec.Informer.GetStore().ListKeys() {
		c.queue.Add(k)
	}
	l, err := c.client.List(ctx, c.spec.Kind, datastore.ListOptions{})
	if err != nil {
		return err
	}
	for _, r := range l.Items {
		if k, ok := c.spec.Source(r); ok {
			c.queue.Add(k)
		}
	}
	return nil
}

func (c *Controller) work(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	start := time.Now()
	err := c.sync(ctx, key)
	c.metrics.syncSeconds.WithLabelValues(c.spec.Name).Observe(time.Since(start).Seconds())
	if err == nil {
		c.queue.Forget(key)
		return true
	}
	if ctx.Err() != nil {
		return true
	}
	c.metrics.failures.WithLabelValues(c.spec.Name).Inc()
	c.log.Error("sync failed, retrying", "key", key, "err", err)
	c.queue.AddRateLimited(key)
	return true
}

// sync makes the stored resource for key what the Kubernetes object says.
func (c *Controller) sync(ctx context.Context, key string) error {
	target := c.spec.Target(key)
	obj, exists, err := c.spec.Informer.GetStore().GetByKey(key)
	if err != nil {
		return err
	}
	var want v3.Resource
	if exists {
		want, err = c.spec.Desired(obj)
		if want == nil {
			return fmt.Errorf("converting %s: %w", key, err)
		}
		if err != nil {
			c.metrics.conversionErrors.WithLabelValues(c.spec.Name).Inc()
			c.log.Error("converted with parts dropped (the result allows less, never more)", "key", key, "err", err)
		}
		want = clean(want)
	}
	cur, err := c.client.Get(ctx, target)
	switch {
	case errors.Is(err, datastore.ErrNotFound):
		if want == nil {
			return nil
		}
		if _, err := c.client.Create(ctx, want); err != nil {
			// ErrAlreadyExists too: created meanwhile, compare again.
			return fmt.Errorf("creating %s: %w", target, err)
		}
		c.log.Info("created", "resource", target.String())
		return nil
	case err != nil:
		return fmt.Errorf("reading %s: %w", target, err)
	}
	if want == nil {
		_, err := c.client.Delete(ctx, target, datastore.DeleteOptions{ResourceVersion: cur.GetResourceVersion()})
		if err != nil && !errors.Is(err, datastore.ErrNotFound) {
			return fmt.Errorf("deleting %s: %w", target, err)
		}
		c.log.Info("deleted", "resource", target.String())
		return nil
	}
	want.Default()
	if same(cur, want) {
		return nil
	}
	want.SetResourceVersion(cur.GetResourceVersion())
	want.SetUID(cur.GetUID())
	want.SetCreationTimestamp(cur.GetCreationTimestamp())
	if _, err := c.client.Update(ctx, want); err != nil {
		return fmt.Errorf("updating %s: %w", target, err)
	}
	c.log.Info("updated", "resource", target.String())
	return nil
}

// clean drops the Kubernetes object's identity that the conversions carry
// (the Kubernetes datastore serves them as they are; etcd assigns its own).
func clean(r v3.Resource) v3.Resource {
	r.SetResourceVersion("")
	r.SetUID("")
	r.SetCreationTimestamp(metav1.Time{})
	return r
}

// same compares what a mirror controls: labels, annotations and spec.
func same(a, b v3.Resource) bool {
	if !maps.Equal(a.GetLabels(), b.GetLabels()) && (len(a.GetLabels()) > 0 || len(b.GetLabels()) > 0) {
		return false
	}
	if !maps.Equal(a.GetAnnotations(), b.GetAnnotations()) && (len(a.GetAnnotations()) > 0 || len(b.GetAnnotations()) > 0) {
		return false
	}
	return reflect.DeepEqual(specJSON(a), specJSON(b))
}

func specJSON(r v3.Resource) any {
	b, err := json.Marshal(r)
	if err != nil {
		return nil
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil
	}
	return m["spec"]
}

// Metrics of the mirroring controllers, labelled by controller.
type Metrics struct {
	syncSeconds      *prometheus.HistogramVec
	failures         *prometheus.CounterVec
	conversionErrors *prometheus.CounterVec
}

// NewMetrics makes the metrics, registered with reg unless nil.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		syncSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "kube_controllers_sync_seconds",
			Help: "Time to bring one Calico resource in step with its Kubernetes object.", Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14)},
			[]string{"controller"}),
		failures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_controllers_sync_failures_total",
			Help: "Syncs that failed and were retried with backoff."}, []string{"controller"}),
		conversionErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "kube_controllers_conversion_errors_total",
			Help: "Kubernetes objects converted with parts dropped (the Calico resource allows less)."}, []string{"controller"}),
	}
	if reg != nil {
		reg.MustRegister(m.syncSeconds, m.failures, m.conversionErrors)
	}
	return m
}
