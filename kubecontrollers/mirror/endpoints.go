package mirror

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Labels Calico puts on every Kubernetes WorkloadEndpoint besides the
// pod's own.
const (
	labelNamespace      = "projectcalico.org/namespace"
	labelOrchestrator   = "projectcalico.org/orchestrator"
	labelServiceAccount = "projectcalico.org/serviceaccount"
)

// Endpoints is the workload-endpoint controller: it keeps the labels of
// each pod's WorkloadEndpoints (written by the CNI plugin) equal to the
// pod's labels plus Calico's projectcalico.org/namespace, /orchestrator
// and /serviceaccount, and their profiles to the namespace's and service
// account's. It never creates or deletes endpoints.
type Endpoints struct {
	inf     cache.SharedIndexInformer
	client  datastore.Client
	period  time.Duration
	queue   workqueue.TypedRateLimitingInterface[string]
	log     *slog.Logger
	metrics *Metrics
}

const endpointsName = "workloadendpoint"

// NewEndpoints registers the pod informer's handlers.
func NewEndpoints(pods cache.SharedIndexInformer, client datastore.Client, period time.Duration, m *Metrics, log *slog.Logger) (*Endpoints, error) {
	if log == nil {
		log = slog.Default()
	}
	if m == nil {
		m = NewMetrics(nil)
	}
	if period <= 0 {
		period = 5 * time.Minute
	}
	e := &Endpoints{inf: pods, client: client, period: period, metrics: m, log: log.With("controller", endpointsName),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: endpointsName})}
	add := func(obj any) {
		if k, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			e.queue.Add(k)
		}
	}
	_, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: add,
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Pod)
			n, ok2 := cur.(*corev1.Pod)
			if ok1 && ok2 && maps.Equal(o.Labels, n.Labels) && o.Spec.ServiceAccountName == n.Spec.ServiceAccountName &&
				o.Annotations["cni.projectcalico.org/containerID"] == n.Annotations["cni.projectcalico.org/containerID"] &&
				o.Status.PodIP == n.Status.PodIP {
				return
			}
			add(cur)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("pod informer: %w", err)
	}
	return e, nil
}

// Run works until ctx ends; the informer must have synced.
func (e *Endpoints) Run(ctx context.Context) {
	defer e.queue.ShutDown()
	go func() {
		<-ctx.Done()
		e.queue.ShutDown()
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		t := time.NewTicker(e.period)
		defer t.Stop()
		for {
			for _, k := range e.inf.GetStore().ListKeys() {
				e.queue.Add(k)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	})
	for e.work(ctx) {
	}
}

func (e *Endpoints) work(ctx context.Context) bool {
	key, quit := e.queue.Get()
	if quit {
		return false
	}
	defer e.queue.Done(key)
	start := time.Now()
	err := e.sync(ctx, key)
	e.metrics.syncSeconds.WithLabelValues(endpointsName).Observe(time.Since(start).Seconds())
	if err == nil {
		e.queue.Forget(key)
		return true
	}
	if ctx.Err() != nil {
		return true
	}
	e.metrics.failures.WithLabelValues(endpointsName).Inc()
	e.log.Error("sync failed, retrying", "pod", key, "err", err)
	e.queue.AddRateLimited(key)
	return true
}

// WantLabels are the labels a pod's WorkloadEndpoints carry.
func WantLabels(pod *corev1.Pod) map[string]string {
	out := make(map[string]string, len(pod.Labels)+3)
	maps.Copy(out, pod.Labels)
	out[labelNamespace] = pod.Namespace
	out[labelOrchestrator] = "k8s"
	if sa := pod.Spec.ServiceAccountName; sa != "" && len(sa) < 63 {
		out[labelServiceAccount] = sa
	}
	return out
}

func wantProfiles(pod *corev1.Pod) []string {
	p := []string{NamespaceProfilePrefix + pod.Namespace}
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		p = append(p, AccountProfilePrefix+pod.Namespace+"."+sa)
	}
	return p
}

func (e *Endpoints) sync(ctx context.Context, key string) error {
	obj, exists, err := e.inf.GetStore().GetByKey(key)
	if err != nil || !exists {
		return err // a deleted pod's endpoints are the CNI's and the GC's
	}
	pod := obj.(*corev1.Pod)
	l, err := e.client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: pod.Namespace})
	if err != nil {
		return fmt.Errorf("listing workload endpoints of %s: %w", key, err)
	}
	labels, profiles := WantLabels(pod), wantProfiles(pod)
	for _, r := range l.Items {
		w := r.(*v3.WorkloadEndpoint)
		if w.Spec.Orchestrator != "k8s" || w.Spec.Pod != pod.Name {
			continue
		}
		if maps.Equal(w.Labels, labels) && slices.Equal(w.Spec.Profiles, profiles) {
			continue
		}
		w.Labels = maps.Clone(labels)
		w.Spec.Profiles = slices.Clone(profiles)
		if _, err := e.client.Update(ctx, w); err != nil {
			if errors.Is(err, datastore.ErrNotFound) {
				continue
			}
			return fmt.Errorf("updating workload endpoint %s/%s: %w", w.Namespace, w.Name, err)
		}
		e.log.Info("updated workload endpoint labels", "endpoint", w.Namespace+"/"+w.Name)
	}
	return nil
}
