// Package node is kube-controllers' node controller: it cleans up after
// deleted Kubernetes Nodes and runs IPAM garbage collection (package
// ipamgc). A Node deletion seen by the informer queues the node's
// clean-up and a GC pass; a GC pass also runs every reconciler period. In
// etcd mode the clean-up deletes the deleted node's Calico Node (the one
// whose k8s orchRef names it, as Calico; Calico nodes without one are never
// touched) through lifecycle.Deleter.DeleteNode, the path calicoctl delete
// node takes: its addresses, block affinities, endpoints, BGP peers and
// per-node configurations go with it. In both modes the GC then releases
// whatever else the node held. All work goes through one rate-limited work
// queue, so failures retry with backoff and one item is never worked on
// twice at once.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coreinformers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/kubecontrollers/ipamgc"
	"github.com/tabbynet/tabby/lifecycle"
)

const (
	gcKey     = "ipam-gc"
	labelsKey = "labels"
)

// Config wires the node controller.
type Config struct {
	Kube   kubernetes.Interface
	Nodes  coreinformers.NodeInformer
	Client datastore.Client
	GC     *ipamgc.GC
	// DeleteNodes: etcd mode, delete the Calico Node and WorkloadEndpoints
	// of a deleted Kubernetes Node.
	DeleteNodes bool
	// SyncLabels: etcd mode, copy Kubernetes node labels to the Calico
	// nodes (on every Node add or label change, and every Period).
	SyncLabels bool
	// Period between GC passes (and label resyncs).
	Period time.Duration
	Logger *slog.Logger
	// OnPass, if set, is called after each GC pass (tests, health).
	OnPass func(ipamgc.Result, error)
}

// Controller is the node controller.
type Controller struct {
	cfg   Config
	nodes corelisters.NodeLister
	queue workqueue.TypedRateLimitingInterface[string]
	log   *slog.Logger
}

// New registers the informer handlers; Run starts the work.
func New(cfg Config) (*Controller, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Period <= 0 {
		cfg.Period = 5 * time.Minute
	}
	c := &Controller{
		cfg:   cfg,
		nodes: cfg.Nodes.Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "node"}),
		log: cfg.Logger.With("controller", "node"),
	}
	_, err := cfg.Nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) {
			if cfg.SyncLabels {
				c.queue.Add(labelsKey)
			}
		},
		UpdateFunc: func(old, cur any) {
			o, ok1 := old.(*corev1.Node)
			n, ok2 := cur.(*corev1.Node)
			if cfg.SyncLabels && ok1 && ok2 && !maps.Equal(o.Labels, n.Labels) {
				c.queue.Add(labelsKey)
			}
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			n, ok := obj.(*corev1.Node)
			if !ok {
				return
			}
			c.log.Info("kubernetes node deleted: cleaning up after it", "node", n.Name)
			c.queue.Add("node/" + n.Name)
			c.queue.Add(gcKey)
		},
	})
	if err != nil {
		return nil, fmt.Errorf("node informer: %w", err)
	}
	return c, nil
}

// Run works until ctx ends. The informer must have synced.
func (c *Controller) Run(ctx context.Context) {
	defer c.queue.ShutDown()
	go func() {
		<-ctx.Done()
		c.queue.ShutDown()
	}()
	if c.cfg.DeleteNodes {
		// Nodes deleted while no replica was leading.
		if err := c.queueOrphanNodes(ctx); err != nil {
			c.log.Error("looking for Calico nodes of deleted Kubernetes nodes", "err", err)
		}
	}
	c.queue.Add(gcKey)
	if c.cfg.SyncLabels {
		c.queue.Add(labelsKey)
	}
	for c.work(ctx) {
	}
}

func (c *Controller) work(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	var err error
	switch key {
	case labelsKey:
		// Also periodic: a Calico node registered after its Kubernetes
		// node gets no Kubernetes event.
		if err = c.syncAllLabels(ctx); err == nil {
			c.queue.Forget(key)
			c.queue.AddAfter(key, c.cfg.Period)
			return true
		}
	case gcKey:
		var res ipamgc.Result
		res, err = c.cfg.GC.Pass(ctx)
		if c.cfg.OnPass != nil {
			c.cfg.OnPass(res, err)
		}
		if err == nil {
			c.queue.Forget(key)
			c.queue.AddAfter(key, c.cfg.Period)
			return true
		}
	default:
		err = c.cleanUpNode(ctx, key[len("node/"):])
		if err == nil {
			c.queue.Forget(key)
			return true
		}
	}
	if ctx.Err() != nil {
		return true
	}
	c.log.Error("retrying", "item", key, "err", err)
	c.queue.AddRateLimited(key)
	return true
}

// queueOrphanNodes queues the Calico nodes whose Kubernetes node is gone.
func (c *Controller) queueOrphanNodes(ctx context.Context) error {
	l, err := c.cfg.Client.List(ctx, v3.KindNode, datastore.ListOptions{})
	if err != nil {
		return err
	}
	for _, r := range l.Items {
		kname, ok := kubernetesName(r.(*v3.Node))
		if !ok {
			continue
		}
		if _, err := c.nodes.Get(kname); apierrors.IsNotFound(err) {
			c.queue.Add("node/" + kname)
		}
	}
	return nil
}

// kubernetesName is the Kubernetes node a Calico node belongs to.
func kubernetesName(n *v3.Node) (string, bool) {
	for _, o := range n.Spec.OrchRefs {
		if o.Orchestrator == "k8s" && o.NodeName != "" {
			return o.NodeName, true
		}
	}
	return "", false
}

// cleanUpNode (etcd mode, DeleteNodes) deletes the Calico Node(s) of a
// Kubernetes node that is gone (found by k8s orchRef) through
// lifecycle.Deleter.DeleteNode, the path calicoctl delete node takes:
// its addresses, block affinities, endpoints, BGP peers, per-node
// configurations and host endpoints go with it. In Kubernetes mode, as in
// Calico, the Calico node was the Kubernetes node and only the GC pass
// runs (the manifests grant no more). The GC pass queued with it releases
// whatever else the node held.
func (c *Controller) cleanUpNode(ctx context.Context, kname string) error {
	if !c.cfg.DeleteNodes {
		return nil
	}
	// The node may be back (same name): look at the API server, not the
	// cache, before deleting anything.
	if _, err := c.cfg.Kube.CoreV1().Nodes().Get(ctx, kname, metav1.GetOptions{}); err == nil {
		return nil
	} else if !apierrors.IsNotFound(err) {
		return fmt.Errorf("checking that node %s is gone: %w", kname, err)
	}
	d := lifecycle.Deleter{Client: c.cfg.Client, Logger: c.log}
	l, err := c.cfg.Client.List(ctx, v3.KindNode, datastore.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Calico nodes: %w", err)
	}
	for _, r := range l.Items {
		n := r.(*v3.Node)
		if k, ok := kubernetesName(n); !ok || k != kname {
			continue
		}
		_, err := d.DeleteNode(ctx, n.Name, datastore.DeleteOptions{ResourceVersion: n.ResourceVersion})
		if err != nil && !errors.Is(err, datastore.ErrNotFound) {
			return fmt.Errorf("deleting Calico node %s of deleted Kubernetes node %s: %w", n.Name, kname, err)
		}
		c.log.Info("cleaned up after a deleted Kubernetes node", "node", n.Name, "kubernetesNode", kname)
	}
	c.queue.Add(gcKey)
	return nil
}

// PodOracle answers ipamgc.Pods from the pod informer's cache, confirming
// every "gone" with a read from the API server.
type PodOracle struct {
	Kube kubernetes.Interface
	Pods corelisters.PodLister
}

// Exists implements ipamgc.Pods.
func (o PodOracle) Exists(ctx context.Context, ns, name string) (bool, error) {
	if _, err := o.Pods.Pods(ns).Get(name); err == nil {
		return true, nil
	}
	_, err := o.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, err
}
