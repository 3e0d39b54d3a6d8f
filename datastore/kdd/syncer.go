package kdd

import (
	"context"
	"log/slog"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Syncer is a datastore.Syncer built the client-go way: one shared
// informer per source of the requested kinds (unstructured for the CRDs,
// typed for pods, namespaces, service accounts, Kubernetes network
// policies and nodes; their lists and watches retried every second while
// the API server is away, retryingListWatch), whose event handlers only enqueue the
// object's key on a rate-limited work queue; one worker takes keys off
// the queue, reads the object's current state from the informer's cache
// (its lister), converts it and delivers the difference from what it
// delivered before for that key.
//
// Because the worker reads the cache rather than the events, a burst of
// changes to one object is delivered once, at its latest state, and when
// an informer relists (the server came back, or its watch history was
// compacted) only real changes come out: an object whose resource version
// is the one already delivered is skipped, one gone from the relist is
// deleted. Updates for one key are delivered in order; a single worker
// also keeps keys in the order they first changed.
//
// An object that cannot be converted (a custom resource that does not
// decode as Tabby's type, a native object with unusable annotations) is
// absent, exactly as in datastore.WatchSyncer: logged and counted once per
// object and resource version (datastore.BadRecordReporter), delivered as
// Deleted if it was delivered before it turned bad, and as Added once it is
// fixed.
//
// StatusInSync is sent once every informer has synced and every key it
// held at that point has been delivered (a marker that goes round the
// queue until it is the last item).
//
// Run owns every goroutine it starts and returns after they stopped.
type Syncer struct {
	c     *Client
	kinds []string
	cb    datastore.SyncerCallbacks
}

// NewSyncer returns an informer-based syncer for kinds over c.
func NewSyncer(c *Client, kinds []string, cb datastore.SyncerCallbacks) datastore.Syncer {
	return &Syncer{c: c, kinds: kinds, cb: cb}
}

// queueKey names one Kubernetes object of one source.
type queueKey struct {
	src int    // index into run.sources; -1 for the in-sync marker
	key string // namespace/name
}

var syncMarker = queueKey{src: -1}

// syncRun is the state of one Run.
type syncRun struct {
	cb        datastore.SyncerCallbacks
	sources   []*source
	informers []cache.SharedIndexInformer
	queue     workqueue.TypedRateLimitingInterface[queueKey]

	// Owned by the worker goroutine.
	delivered map[queueKey]v3.Resource // what was last delivered for a source object
	inSync    bool
	bad       datastore.BadRecordReporter
}

// Run implements datastore.Syncer.
func (s *Syncer) Run(ctx context.Context) {
	s.cb.OnStatusUpdated(datastore.StatusWaitForDatastore)
	r := &syncRun{
		cb: s.cb,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[queueKey](),
			workqueue.TypedRateLimitingQueueConfig[queueKey]{Name: "tabby-kdd-syncer"}),
		delivered: map[queueKey]v3.Resource{},
	}
	var static []datastore.Update
	var started []cache.SharedIndexInformer
	shared := map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	var registrations []cache.ResourceEventHandlerRegistration
	for _, kind := range s.kinds {
		kb, err := s.c.backend(kind)
		if err != nil {
			// Like the generic syncer, never claim to be in sync.
			slog.Error("syncer cannot follow this kind", "kind", kind, "err", err)
			<-ctx.Done()
			return
		}
		for _, obj := range kb.static {
			static = append(static, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(obj), Object: obj})
		}
		for _, src := range kb.sources {
			// One informer per resource (an optional one is its own).
			inf, ok := shared[src.gvr]
			if !ok || src.optional {
				inf = sourceInformer(src)
				started = append(started, inf)
				if !src.optional {
					shared[src.gvr] = inf
				}
				// The caches hold every object; managed fields are never read.
				if err := inf.SetTransform(stripManagedFields); err != nil {
					slog.Debug("informer already started; keeping managed fields", "resource", src.name, "err", err)
				}
			}
			idx := len(r.sources)
			r.sources = append(r.sources, src)
			r.informers = append(r.informers, inf)
			reg, err := inf.AddEventHandler(r.handler(idx))
			if err != nil {
				slog.Error("syncer cannot watch a source", "resource", src.name, "err", err)
				<-ctx.Done()
				return
			}
			registrations = append(registrations, reg)
		}
	}
	if len(static) > 0 {
		s.cb.OnUpdates(static)
	}

	var wg sync.WaitGroup
	for _, inf := range started {
		wg.Add(1)
		go func() {
			defer wg.Done()
			inf.RunWithContext(ctx)
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		synced := make([]cache.InformerSynced, len(registrations))
		for i, reg := range registrations {
			synced[i] = reg.HasSynced
		}
		if cache.WaitForCacheSync(ctx.Done(), synced...) {
			r.queue.Add(syncMarker)
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		<-ctx.Done()
		r.queue.ShutDown()
	}()

	for r.processNext() {
	}
	wg.Wait()
}

// sourceInformer is an informer over a source's own list and watch,
// retried as Calico's syncer retries (retryingListWatch). A CRD's source
// sees an empty resource while the CRD is not installed, where a
// factory's informer would never sync. Native objects come typed, CRDs
// unstructured.
func sourceInformer(src *source) cache.SharedIndexInformer {
	var example runtime.Object = &unstructured.Unstructured{}
	if src.native {
		example = nil
	}
	return cache.NewSharedIndexInformer(retryingListWatch(src, listRetryInterval), example, 0, cache.Indexers{})
}

// stripManagedFields drops an object's managed fields before it is
// cached (the object is freshly decoded, so it may be changed).
func stripManagedFields(obj any) (any, error) {
	if acc, err := meta.Accessor(obj); err == nil {
		acc.SetManagedFields(nil)
	}
	return obj, nil
}

// handler enqueues the key of every object event of source idx.
func (r *syncRun) handler(idx int) cache.ResourceEventHandler {
	enqueue := func(obj any) {
		key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
		if err != nil {
			slog.Warn("syncer cannot key an object", "resource", r.sources[idx].name, "err", err)
			return
		}
		r.queue.Add(queueKey{src: idx, key: key})
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}
}

// processNext handles one queue item; false once the queue shut down.
func (r *syncRun) processNext() bool {
	item, shutdown := r.queue.Get()
	if shutdown {
		return false
	}
	defer r.queue.Done(item)
	if item == syncMarker {
		if r.queue.Len() > 0 {
			r.queue.Add(syncMarker) // initial items still queued: go round again
		} else if !r.inSync {
			r.inSync = true
			r.cb.OnStatusUpdated(datastore.StatusInSync)
		}
		return true
	}
	r.sync(item)
	// Processing reads local state only and cannot fail transiently, so
	// nothing is ever retried: reset the item's backoff.
	r.queue.Forget(item)
	return true
}

// sync delivers the change, if any, between what was delivered for one
// Kubernetes object and its state in the informer cache.
func (r *syncRun) sync(item queueKey) {
	src := r.sources[item.src]
	var cur v3.Resource
	var isBad bool
	raw, exists, err := r.informers[item.src].GetIndexer().GetByKey(item.key)
	if err == nil && exists {
		obj, visible, err := src.convert(raw.(runtime.Object))
		switch {
		case err != nil:
			isBad = true
			b := src.badRecord(raw.(runtime.Object), err)
			if prev := r.delivered[item]; prev != nil {
				b.Key = datastore.KeyOf(prev)
			}
			r.bad.Seen(src.name+"/"+item.key, b)
		case visible:
			cur = obj
		}
	}
	if !isBad {
		r.bad.Gone(src.name + "/" + item.key)
	}
	prev := r.delivered[item]
	var ups []datastore.Update
	switch {
	case cur == nil && prev == nil:
		return
	case cur == nil:
		ups = append(ups, datastore.Update{Type: datastore.EventDeleted, Key: datastore.KeyOf(prev), Object: prev})
		delete(r.delivered, item)
	case prev == nil:
		ups = append(ups, datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(cur), Object: cur})
		r.delivered[item] = cur
	case datastore.KeyOf(prev) != datastore.KeyOf(cur):
		ups = append(ups,
			datastore.Update{Type: datastore.EventDeleted, Key: datastore.KeyOf(prev), Object: prev},
			datastore.Update{Type: datastore.EventAdded, Key: datastore.KeyOf(cur), Object: cur})
		r.delivered[item] = cur
	case prev.GetResourceVersion() == cur.GetResourceVersion():
		return // a relist re-reporting what was already delivered
	case datastore.VersionOnlyChange(prev, cur):
		r.delivered[item] = cur // a write Calico's view does not show
		return
	default:
		ups = append(ups, datastore.Update{Type: datastore.EventModified, Key: datastore.KeyOf(cur), Object: cur})
		r.delivered[item] = cur
	}
	r.cb.OnUpdates(ups)
}
