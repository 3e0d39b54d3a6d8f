package datastore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Key names one resource.
type Key struct {
	Kind      string // e.g. v3.KindIPPool
	Namespace string // empty for cluster-scoped kinds
	Name      string
}

func (k Key) String() string {
	if k.Namespace != "" {
		return k.Kind + "(" + k.Namespace + "/" + k.Name + ")"
	}
	return k.Kind + "(" + k.Name + ")"
}

// KeyOf returns the key of a resource.
func KeyOf(r v3.Resource) Key {
	return Key{Kind: v3.KindOf(r), Namespace: r.GetNamespace(), Name: r.GetName()}
}

// Client reads and writes resources. Implementations are safe for
// concurrent use. Returned objects are the caller's to modify.
type Client interface {
	// Create stores a new resource (defaulted and validated first) and
	// returns it as stored, with ResourceVersion, UID and
	// CreationTimestamp set. ErrAlreadyExists if the key is taken.
	Create(ctx context.Context, r v3.Resource) (v3.Resource, error)

	// Update replaces a resource if its stored version still equals
	// r.GetResourceVersion() (compare-and-swap; the version is required).
	// ErrConflict when it changed since, ErrNotFound when it is gone.
	Update(ctx context.Context, r v3.Resource) (v3.Resource, error)

	// Delete removes a resource and returns its last state. With
	// preconditions it deletes only if the stored version/UID still match
	// (ErrConflict otherwise). ErrNotFound when absent.
	Delete(ctx context.Context, k Key, opts DeleteOptions) (v3.Resource, error)

	// Get returns one resource, or ErrNotFound.
	Get(ctx context.Context, k Key) (v3.Resource, error)

	// List returns the resources of a kind, optionally restricted to a
	// namespace and to labels matching a Calico selector, sorted by
	// namespace then name, with the revision the list is consistent at.
	// Stored records that cannot be decoded are not among the items: they
	// are in List.Bad (whatever the selector), and never fail the list.
	List(ctx context.Context, kind string, opts ListOptions) (*List, error)

	// Watch streams changes to a kind after opts.Revision (from now when
	// empty). A revision too old to replay yields ErrRevisionGone, either
	// from Watch itself or as an EventError on the channel. A record
	// written in a form that cannot be decoded comes as an
	// EventUndecodable, and the watch goes on.
	Watch(ctx context.Context, kind string, opts WatchOptions) (Watcher, error)

	// Close releases connections.
	Close() error
}

// DeleteOptions are preconditions for a delete.
type DeleteOptions struct {
	ResourceVersion string // delete only if the stored version equals this
	UID             string // delete only if the stored UID equals this
}

// ListOptions restrict a list.
type ListOptions struct {
	Namespace string // "" lists all namespaces
	Selector  string // Calico selector over the resources' labels; "" is all()
	// Node restricts a list of BlockAffinities to one node's (spec.node);
	// other kinds refuse it (ErrInvalid). Backends ask the store for that
	// node's only: etcd reads the node's key range, the Kubernetes
	// datastore selects by Calico's projectcalico.org/hostname-hash label
	// (see NodeIndexer for records written without it). The cost of the
	// read grows with the node's affinities, not the cluster's.
	Node string
	// Cached allows an answer from a cache that may be a little behind the
	// store: on the Kubernetes datastore the API server's watch cache
	// (resourceVersion "0"), which answers at once where a consistent list
	// waits until the cache is proven current (measured on kube-apiserver
	// 1.37: ~85-95 ms after any write in the cluster, against ~0.7 ms).
	// Only for reads whose staleness a later compare-and-swap or create
	// catches, or that are racy anyway (IPAM's look at pools, reservations
	// and the node's affinities before it writes). etcd ignores it: its
	// reads are consistent and cheap.
	Cached bool
}

// CheckNode refuses ListOptions.Node for a kind other than BlockAffinity.
func CheckNode(kind, node string) error {
	if node != "" && kind != v3.KindBlockAffinity {
		return fmt.Errorf("%w: a list of %s cannot be restricted to a node (only BlockAffinities)", ErrInvalid, kind)
	}
	return nil
}

// NodeIndexer is implemented by backends whose per-node lists
// (ListOptions.Node) rely on an index that records written by older
// software may lack: the Kubernetes datastore selects a node's
// BlockAffinities by a label Calico releases before v3.31 did not write.
// IndexNode adds the index to the node's records of kind that lack it
// (as Calico's ipam UpgradeHost does) and returns how many it changed;
// those records are invisible to per-node lists until then. cached: the
// records lacking the index may be looked for in a cache a little behind
// the store (ListOptions.Cached; the changes themselves are
// compare-and-swaps).
type NodeIndexer interface {
	IndexNode(ctx context.Context, kind, node string, cached bool) (int, error)
}

// PageLister is implemented by clients that can list a kind in pages,
// all read at one revision (etcd): a consumer can start on the first
// objects while the rest are fetched and decoded. page gets each page (its
// Items sorted, its Bad, and the list's Revision); an error from page
// stops the listing and is returned.
type PageLister interface {
	ListPages(ctx context.Context, kind string, pageSize int, page func(*List) error) error
}

// List is the result of a list.
type List struct {
	Items    []v3.Resource // in Sort's order
	Revision string        // watch from here to see every later change
	// Bad are the stored records of the kind (and namespace) that cannot
	// be decoded, in storage order; they are not in Items. A caller that
	// must see every record (to free what no record uses, say) treats a
	// non-empty Bad as an error: see Complete.
	Bad []BadRecord
	// Total, when not 0, is the number of records of the list in the
	// store: a paged list's pages say how many all its pages hold.
	Total int
}

// Complete returns an error naming the undecodable records of l, if any:
// for callers that must not act on a partial list.
func (l *List) Complete() error {
	if len(l.Bad) == 0 {
		return nil
	}
	errs := make([]error, len(l.Bad))
	for i, b := range l.Bad {
		errs[i] = b
	}
	return fmt.Errorf("%d stored record(s) cannot be decoded (fix or delete them): %w", len(l.Bad), errors.Join(errs...))
}

// Sort puts items in the order every List has: by namespace, then name.
func Sort(items []v3.Resource) {
	slices.SortFunc(items, func(a, b v3.Resource) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	})
}

// WatchOptions position and restrict a watch.
type WatchOptions struct {
	Namespace string
	Revision  string // changes strictly after this revision; "" means from now
}

// EventType says what happened to a resource.
type EventType string

const (
	EventAdded    EventType = "Added"
	EventModified EventType = "Modified"
	EventDeleted  EventType = "Deleted"
	// EventError carries Err; the watch is over after it.
	EventError EventType = "Error"
	// EventUndecodable: a record was written that cannot be decoded.
	// Bad says which; Object is nil. The watch goes on. A consumer that
	// held the record's earlier state should drop it (see WatchSyncer).
	EventUndecodable EventType = "Undecodable"
)

// Event is one change seen by a watch.
type Event struct {
	Type     EventType
	Object   v3.Resource // the new state; for Deleted, the last state
	Previous v3.Resource // the state before a Modified (nil if unknown)
	Revision string      // the store revision of this change
	Err      error       // for EventError
	Bad      *BadRecord  // for EventUndecodable
}

// Watcher is a running watch. The channel closes after Stop, after the
// context ends, or after an EventError.
type Watcher interface {
	ResultChan() <-chan Event
	Stop()
}

// MultiReader is an optional interface of a Client: several Gets and Lists
// answered in one round trip, all consistent at one revision. A short-lived
// caller (a CNI ADD) that needs several independent reads before its first
// write implements them with ReadMany; use the package function ReadMany,
// which falls back to issuing the reads in parallel when a Client does not
// implement it.
type MultiReader interface {
	// ReadMany performs reqs and returns one result per request, in
	// order. A request that fails on its own (ErrNotFound for a Get, an
	// unknown kind) fails only its result; the error return is for the
	// round trip as a whole (the store is unreachable).
	ReadMany(ctx context.Context, reqs []ReadRequest) ([]ReadResult, error)
}

// ReadRequest is one read of a ReadMany: a Get of Key when List is false;
// otherwise a List of Key.Kind in Key.Namespace ("" for all), restricted to
// one node's BlockAffinities when Node is set (see ListOptions.Node).
type ReadRequest struct {
	Key  Key
	List bool
	Node string
	// Cached: see ListOptions.Cached; for a Get, the client's
	// CachedGetter when it has one.
	Cached bool
}

// ReadResult answers one ReadRequest: Object for a Get, List for a List,
// or Err.
type ReadResult struct {
	Object v3.Resource
	List   *List
	Err    error
}

// ReadMany performs reqs on c: in one round trip when c is a MultiReader,
// else as parallel Gets and Lists (one round trip of latency, several
// requests). Results are in request order; see MultiReader.
func ReadMany(ctx context.Context, c Client, reqs []ReadRequest) ([]ReadResult, error) {
	if m, ok := c.(MultiReader); ok {
		return m.ReadMany(ctx, reqs)
	}
	return ReadEach(ctx, c, reqs), nil
}

// ReadEach performs reqs as separate, parallel Gets and Lists on c (the
// fallback of ReadMany).
func ReadEach(ctx context.Context, c Client, reqs []ReadRequest) []ReadResult {
	out := make([]ReadResult, len(reqs))
	var wg sync.WaitGroup
	for i, r := range reqs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if !r.List {
				out[i].Object, out[i].Err = get(ctx, c, r.Key, r.Cached)
				return
			}
			out[i].List, out[i].Err = c.List(ctx, r.Key.Kind, ListOptions{Namespace: r.Key.Namespace, Node: r.Node, Cached: r.Cached})
		}()
	}
	wg.Wait()
	return out
}

// CachedGetter is an optional interface of a Client: a Get that may be
// answered from a cache a little behind the store, as ListOptions.Cached
// allows for a List (on the Kubernetes datastore the API server's watch
// cache, without a read from etcd).
type CachedGetter interface {
	GetCached(ctx context.Context, k Key) (v3.Resource, error)
}

// get is c.Get, or its GetCached when cached and c has one.
func get(ctx context.Context, c Client, k Key, cached bool) (v3.Resource, error) {
	if g, ok := c.(CachedGetter); ok && cached {
		return g.GetCached(ctx, k)
	}
	return c.Get(ctx, k)
}

// NameLister is an optional interface of a Client: the names of a kind's
// records (cluster-scoped kinds), without reading the records themselves:
// on the Kubernetes datastore the objects' metadata only, a fraction of
// the bytes and none of the decoding of a List. Use the package function
// ListNames, which falls back to a List.
type NameLister interface {
	ListNames(ctx context.Context, kind string, cached bool) ([]string, error)
}

// ListNames returns the names of every stored record of a cluster-scoped
// kind, undecodable ones included (they exist all the same), through
// c's NameLister when it has one, else from a List. cached: see
// ListOptions.Cached.
func ListNames(ctx context.Context, c Client, kind string, cached bool) ([]string, error) {
	if nl, ok := c.(NameLister); ok {
		return nl.ListNames(ctx, kind, cached)
	}
	l, err := c.List(ctx, kind, ListOptions{Cached: cached})
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(l.Items)+len(l.Bad))
	for _, it := range l.Items {
		out = append(out, it.GetName())
	}
	for _, b := range l.Bad {
		out = append(out, b.Key.Name)
	}
	return out, nil
}
