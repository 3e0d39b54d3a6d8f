// Package ipamtest holds test doubles for IPAM: an in-memory
// datastore.Client with faithful compare-and-swap that can inject conflicts
// and outages, and a wrapper that counts round trips.
package ipamtest

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Store is an in-memory datastore.Client. Writes are defaulted and
// validated like the real backends (datastore.PrepareWrite), but without
// the checks against other objects (datastore.CheckWrite: e.g. IPPool
// overlap), like a raw write into etcd: tests can store what a careless
// writer could. Update and conditional Delete are compare-and-swap on a
// global revision. Watch is not supported.
type Store struct {
	mu    sync.Mutex
	rev   int64
	items map[datastore.Key]v3.Resource

	// Fail, when set, is consulted before every operation; a non-nil
	// error is returned instead of performing it. Set it before use or
	// under your own synchronisation; it is called without the lock.
	Fail func(op string, k datastore.Key) error
	// FailAfter, when set, is consulted after a write has been applied;
	// a non-nil error is returned although the write took effect (an
	// ambiguous failure, like a timeout after the server committed).
	FailAfter func(op string, k datastore.Key) error
	// Now stamps creationTimestamp [default time.Now].
	Now func() time.Time
}

var _ datastore.Client = (*Store)(nil)

// NewStore returns an empty store.
func NewStore() *Store { return &Store{items: map[datastore.Key]v3.Resource{}} }

func (s *Store) fail(op string, k datastore.Key) error {
	if s.Fail == nil {
		return nil
	}
	if err := s.Fail(op, k); err != nil {
		return &datastore.OpError{Op: op, Key: k, Err: err}
	}
	return nil
}

func (s *Store) failAfter(op string, k datastore.Key) error {
	if s.FailAfter == nil {
		return nil
	}
	if err := s.FailAfter(op, k); err != nil {
		return &datastore.OpError{Op: op, Key: k, Err: err}
	}
	return nil
}

func copyOf(r v3.Resource) v3.Resource { return r.DeepCopyObject().(v3.Resource) }

// Create implements datastore.Client.
func (s *Store) Create(_ context.Context, r v3.Resource) (v3.Resource, error) {
	obj, err := datastore.PrepareWrite("create", r)
	if err != nil {
		return nil, err
	}
	k := datastore.KeyOf(obj)
	if err := s.fail("create", k); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.items[k]; ok {
		return nil, &datastore.OpError{Op: "create", Key: k, Err: datastore.ErrAlreadyExists}
	}
	s.rev++
	obj.SetResourceVersion(strconv.FormatInt(s.rev, 10))
	obj.SetUID(uuid.NewUUID())
	now := time.Now()
	if s.Now != nil {
		now = s.Now()
	}
	obj.SetCreationTimestamp(metav1.NewTime(now))
	s.items[k] = obj
	if err := s.failAfter("create", k); err != nil {
		return nil, err
	}
	return copyOf(obj), nil
}

// Update implements datastore.Client.
func (s *Store) Update(_ context.Context, r v3.Resource) (v3.Resource, error) {
	obj, err := datastore.PrepareWrite("update", r)
	if err != nil {
		return nil, err
	}
	k := datastore.KeyOf(obj)
	if err := s.fail("update", k); err != nil {
		return nil, err
	}
	if obj.GetResourceVersion() == "" {
		return nil, &datastore.OpError{Op: "update", Key: k, Err: &datastore.ValidationError{Errors: v3.ErrorList{{Path: "metadata.resourceVersion", Msg: "is required"}}}}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.items[k]
	if !ok {
		return nil, &datastore.OpError{Op: "update", Key: k, Err: datastore.ErrNotFound}
	}
	if cur.GetResourceVersion() != obj.GetResourceVersion() {
		return nil, &datastore.OpError{Op: "update", Key: k, Err: datastore.ErrConflict}
	}
	s.rev++
	obj.SetResourceVersion(strconv.FormatInt(s.rev, 10))
	obj.SetUID(cur.GetUID())
	obj.SetCreationTimestamp(cur.GetCreationTimestamp())
	s.items[k] = obj
	if err := s.failAfter("update", k); err != nil {
		return nil, err
	}
	return copyOf(obj), nil
}

// Delete implements datastore.Client.
func (s *Store) Delete(_ context.Context, k datastore.Key, opts datastore.DeleteOptions) (v3.Resource, error) {
	if err := s.fail("delete", k); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, ok := s.items[k]
	if !ok {
		return nil, &datastore.OpError{Op: "delete", Key: k, Err: datastore.ErrNotFound}
	}
	if (opts.ResourceVersion != "" && opts.ResourceVersion != cur.GetResourceVersion()) ||
		(opts.UID != "" && opts.UID != string(cur.GetUID())) {
		return nil, &datastore.OpError{Op: "delete", Key: k, Err: datastore.ErrConflict}
	}
	s.rev++
	delete(s.items, k)
	if err := s.failAfter("delete", k); err != nil {
		return nil, err
	}
	return copyOf(cur), nil
}

// Get implements datastore.Client.
func (s *Store) Get(_ context.Context, k datastore.Key) (v3.Resource, error) {
	if err := s.fail("get", k); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.getLocked(k)
}

func (s *Store) getLocked(k datastore.Key) (v3.Resource, error) {
	cur, ok := s.items[k]
	if !ok {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: datastore.ErrNotFound}
	}
	return copyOf(cur), nil
}

// List implements datastore.Client.
func (s *Store) List(_ context.Context, kind string, opts datastore.ListOptions) (*datastore.List, error) {
	if err := s.fail("list", datastore.Key{Kind: kind, Namespace: opts.Namespace}); err != nil {
		return nil, err
	}
	sel, err := selector.Parse(opts.Selector)
	if err == nil {
		err = datastore.CheckNode(kind, opts.Node)
	}
	if err != nil {
		return nil, &datastore.OpError{Op: "list", Key: datastore.Key{Kind: kind}, Err: err}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.listLocked(kind, opts, sel), nil
}

func (s *Store) listLocked(kind string, opts datastore.ListOptions, sel *selector.Selector) *datastore.List {
	out := &datastore.List{Revision: strconv.FormatInt(s.rev, 10)}
	for k, r := range s.items {
		if k.Kind != kind || (opts.Namespace != "" && k.Namespace != opts.Namespace) {
			continue
		}
		if sel != nil && !sel.Evaluate(r.GetLabels()) {
			continue
		}
		if ba, ok := r.(*v3.BlockAffinity); ok && opts.Node != "" && ba.Spec.Node != opts.Node {
			continue
		}
		out.Items = append(out.Items, copyOf(r))
	}
	datastore.Sort(out.Items)
	return out
}

var _ datastore.MultiReader = (*Store)(nil)

// ReadMany implements datastore.MultiReader: every read at one revision.
// Fail is consulted per request ("get" or "list"); its errors fail only
// that request.
func (s *Store) ReadMany(_ context.Context, reqs []datastore.ReadRequest) ([]datastore.ReadResult, error) {
	out := make([]datastore.ReadResult, len(reqs))
	for i, r := range reqs {
		op := "get"
		if r.List {
			op = "list"
		}
		out[i].Err = s.fail(op, r.Key)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, r := range reqs {
		switch {
		case out[i].Err != nil:
		case !r.List:
			out[i].Object, out[i].Err = s.getLocked(r.Key)
		case datastore.CheckNode(r.Key.Kind, r.Node) != nil:
			out[i].Err = &datastore.OpError{Op: "list", Key: r.Key, Err: datastore.CheckNode(r.Key.Kind, r.Node)}
		default:
			out[i].List = s.listLocked(r.Key.Kind, datastore.ListOptions{Namespace: r.Key.Namespace, Node: r.Node}, nil)
		}
	}
	return out, nil
}

// ErrNoWatch is returned by Store.Watch.
var ErrNoWatch = errors.New("ipamtest.Store does not support watches")

// Watch implements datastore.Client (unsupported).
func (s *Store) Watch(context.Context, string, datastore.WatchOptions) (datastore.Watcher, error) {
	return nil, ErrNoWatch
}

// Close implements datastore.Client.
func (s *Store) Close() error { return nil }

// Counter wraps a Client and counts its round trips by operation.
type Counter struct {
	datastore.Client
	Creates, Updates, Deletes, Gets, Lists atomic.Int64
	// MultiReads counts ReadMany transactions (each one round trip).
	MultiReads atomic.Int64
}

var _ datastore.MultiReader = (*Counter)(nil)

// Total is the number of round trips so far.
func (c *Counter) Total() int64 {
	return c.Creates.Load() + c.Updates.Load() + c.Deletes.Load() + c.Gets.Load() + c.Lists.Load() + c.MultiReads.Load()
}

// Reset zeroes the counts.
func (c *Counter) Reset() {
	c.Creates.Store(0)
	c.Updates.Store(0)
	c.Deletes.Store(0)
	c.Gets.Store(0)
	c.Lists.Store(0)
	c.MultiReads.Store(0)
}

// Create implements datastore.Client.
func (c *Counter) Create(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	c.Creates.Add(1)
	return c.Client.Create(ctx, r)
}

// Update implements datastore.Client.
func (c *Counter) Update(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	c.Updates.Add(1)
	return c.Client.Update(ctx, r)
}

// Delete implements datastore.Client.
func (c *Counter) Delete(ctx context.Context, k datastore.Key, o datastore.DeleteOptions) (v3.Resource, error) {
	c.Deletes.Add(1)
	return c.Client.Delete(ctx, k, o)
}

// Get implements datastore.Client.
func (c *Counter) Get(ctx context.Context, k datastore.Key) (v3.Resource, error) {
	c.Gets.Add(1)
	return c.Client.Get(ctx, k)
}

// List implements datastore.Client.
func (c *Counter) List(ctx context.Context, kind string, o datastore.ListOptions) (*datastore.List, error) {
	c.Lists.Add(1)
	return c.Client.List(ctx, kind, o)
}

// ReadMany implements datastore.MultiReader: one round trip when the
// wrapped Client is a MultiReader, else its separate (counted) reads.
func (c *Counter) ReadMany(ctx context.Context, reqs []datastore.ReadRequest) ([]datastore.ReadResult, error) {
	if m, ok := c.Client.(datastore.MultiReader); ok {
		c.MultiReads.Add(1)
		return m.ReadMany(ctx, reqs)
	}
	return datastore.ReadEach(ctx, c, reqs), nil
}
