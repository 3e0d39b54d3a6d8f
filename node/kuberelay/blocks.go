package kuberelay

import (
	"context"
	"net/netip"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/ipam"
)

// Calico's IPAMBlock and BlockAffinity resources.
var (
	blocksGVR     = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "ipamblocks"}
	affinitiesGVR = schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: "blockaffinities"}
)

// affineBlocks watches the IPAM blocks affine to the node, each by its
// name (a block carries no label of its node, and the cluster's blocks
// are O(cluster)): the block an ADD reads is one of them. It follows the
// node's block affinities as the affinity watch reports them.
type affineBlocks struct {
	dyn dynamic.Interface

	mu      sync.Mutex
	ctx     context.Context // Run's; nil before
	watches map[string]*blockWatch
}

// blockWatch is one block's watch.
type blockWatch struct {
	inf  cache.SharedIndexInformer
	stop context.CancelFunc
}

// follow makes blocks follow the affinities inf reports.
func (b *affineBlocks) follow(inf cache.SharedIndexInformer) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { b.affinity(o, true) },
		UpdateFunc: func(_, o any) { b.affinity(o, true) },
		DeleteFunc: func(o any) { b.affinity(o, false) },
	})
}

// run starts the watches of the affinities seen so far, and those to come,
// until ctx ends.
func (b *affineBlocks) run(ctx context.Context) {
	b.mu.Lock()
	b.ctx = ctx
	for _, w := range b.watches {
		b.start(w)
	}
	b.mu.Unlock()
}

// affinity starts or stops the watch of the block an affinity names.
func (b *affineBlocks) affinity(o any, present bool) {
	if d, ok := o.(cache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return
	}
	cidr, _, _ := unstructured.NestedString(u.Object, "spec", "cidr")
	p, err := netip.ParsePrefix(cidr)
	if err != nil {
		return
	}
	name := ipam.BlockName(p)
	b.mu.Lock()
	defer b.mu.Unlock()
	w, have := b.watches[name]
	switch {
	case present && !have:
		w = &blockWatch{inf: dynamicinformer.NewFilteredDynamicInformer(b.dyn, blocksGVR, metav1.NamespaceAll, 0, cache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }).Informer()}
		b.watches[name] = w
		if b.ctx != nil {
			b.start(w)
		}
	case !present && have:
		if w.stop != nil {
			w.stop()
		}
		delete(b.watches, name)
	}
}

// start runs w's watch under b.ctx; b.mu is held.
func (b *affineBlocks) start(w *blockWatch) {
	ctx, stop := context.WithCancel(b.ctx)
	w.stop = stop
	go w.inf.Run(ctx.Done())
}

// get returns block name from its watch; ok is false when the block is
// not watched, not yet listed or not there: the read goes to the API
// server.
func (b *affineBlocks) get(name string) (obj any, ok bool) {
	b.mu.Lock()
	w := b.watches[name]
	b.mu.Unlock()
	if w == nil || !w.inf.HasSynced() {
		return nil, false
	}
	obj, exists, err := w.inf.GetStore().GetByKey(name)
	return obj, exists && err == nil
}
