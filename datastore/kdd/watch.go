package kdd

import (
	"context"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/pager"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Watch implements datastore.Client: one Kubernetes watch per source of
// the kind, each from its part of the revision, merged into one stream
// whose events carry the combined revision. A watch the server closes
// (its request timeout) is resumed from the last revision seen; one that
// cannot be resumed ends the stream with an EventError (ErrRevisionGone
// for 410 Gone, an UnavailableError when the server is down).
func (c *Client) Watch(ctx context.Context, kind string, opts datastore.WatchOptions) (datastore.Watcher, error) {
	k := datastore.Key{Kind: kind, Namespace: opts.Namespace}
	fail := func(err error) (datastore.Watcher, error) {
		return nil, &datastore.OpError{Op: "watch", Key: k, Err: err}
	}
	kb, err := c.backend(kind)
	if err != nil {
		return fail(err)
	}
	ns := opts.Namespace
	if !kb.info.Namespaced {
		ns = ""
	}
	var revs []string
	if opts.Revision == "" {
		rctx, cancel := c.reqCtx(ctx)
		defer cancel()
		for _, src := range kb.sources {
			rev, err := c.currentRevision(rctx, src, ns)
			if err != nil {
				return fail(err)
			}
			revs = append(revs, rev)
		}
	} else if revs, err = splitRevision(opts.Revision, len(kb.sources)); err != nil {
		return fail(err)
	}

	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, out: make(chan datastore.Event, 64), revs: revs}
	var streams []*sourceWatch
	for i, src := range kb.sources {
		sw := &sourceWatch{c: c, w: w, idx: i, src: src, ns: ns, rev: revs[i],
			last: map[string]v3.Resource{}, hidden: map[string]bool{}}
		err := sw.seed(wctx)
		if err == nil {
			err = sw.start(wctx)
		}
		if err != nil {
			cancel()
			for _, s := range streams {
				s.k8s.Stop()
			}
			return fail(err)
		}
		streams = append(streams, sw)
	}
	w.wg.Add(len(streams))
	for _, sw := range streams {
		go func() {
			defer w.wg.Done()
			sw.run(wctx)
		}()
	}
	go func() {
		w.wg.Wait()
		close(w.out)
	}()
	return w, nil
}

// watcher merges the streams of a kind's sources.
type watcher struct {
	cancel context.CancelFunc
	out    chan datastore.Event
	wg     sync.WaitGroup

	mu   sync.Mutex // serialises sends, guards revs and done
	revs []string
	done bool
}

func (w *watcher) ResultChan() <-chan datastore.Event { return w.out }
func (w *watcher) Stop()                              { w.cancel() }

// send delivers an event from source idx at its revision rev, stamped with
// the combined revision. An error event ends the whole watch.
func (w *watcher) send(ctx context.Context, idx int, rev string, ev datastore.Event) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.done {
		return false
	}
	if rev != "" {
		w.revs[idx] = rev
	}
	ev.Revision = joinRevision(w.revs)
	select {
	case w.out <- ev:
	case <-ctx.Done():
		return false
	}
	if ev.Type == datastore.EventError {
		w.done = true
		w.cancel()
		return false
	}
	return true
}

// sourceWatch follows one source. It remembers the objects it delivered
// (by the Kubernetes object's namespace/name) so that it can fill in
// Previous, and turn a pod that loses its IP or finishes into a Deleted
// and one that gains an IP into an Added.
type sourceWatch struct {
	c   *Client
	w   *watcher
	idx int
	src *source
	ns  string
	rev string // last revision seen
	k8s watch.Interface

	last   map[string]v3.Resource // delivered and still visible
	hidden map[string]bool        // seen, but not visible
}

// seed records, for a source that hides objects, which objects were
// visible at the watch's starting revision (a list at exactly that
// revision), so that an object becoming visible later is reported as
// Added, and one changing as Modified with its Previous state.
func (s *sourceWatch) seed(ctx context.Context) error {
	if !s.src.hides {
		return nil
	}
	ns := s.ns
	if !s.src.namespaced {
		ns = ""
	}
	rctx, cancel := s.c.reqCtx(ctx)
	defer cancel()
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return s.src.list(rctx, ns, o)
	}))
	return s.c.storeErr(p.EachListItem(rctx, metav1.ListOptions{ResourceVersion: s.rev, ResourceVersionMatch: metav1.ResourceVersionMatchExact},
		func(o runtime.Object) error {
			acc, err := meta.Accessor(o)
			if err != nil {
				return err
			}
			nk := acc.GetNamespace() + "/" + acc.GetName()
			if obj, visible, err := s.src.convert(o); err == nil && visible {
				s.last[nk] = obj
			} else {
				s.hidden[nk] = true
			}
			return nil
		}))
}

func (s *sourceWatch) start(ctx context.Context) error {
	w, err := s.src.watch(ctx, s.ns, metav1.ListOptions{ResourceVersion: s.rev, AllowWatchBookmarks: true})
	if err != nil {
		return s.c.storeErr(err)
	}
	s.k8s = w
	return nil
}

func (s *sourceWatch) run(ctx context.Context) {
	defer func() { s.k8s.Stop() }() // the latest watch; stopping twice is fine
	for {
		for ev := range s.k8s.ResultChan() {
			if !s.handle(ctx, ev) {
				return
			}
		}
		s.k8s.Stop()
		if ctx.Err() != nil {
			return
		}
		// The server ended the watch (request timeout, restart): resume.
		if err := s.start(ctx); err != nil {
			s.w.send(ctx, s.idx, "", datastore.Event{Type: datastore.EventError, Err: err})
			return
		}
	}
}

// handle turns one Kubernetes event into at most two datastore events.
func (s *sourceWatch) handle(ctx context.Context, ev watch.Event) bool {
	switch ev.Type {
	case watch.Error:
		raw := apierrors.FromObject(ev.Object)
		if apierrors.IsTimeout(raw) || apierrors.IsServerTimeout(raw) {
			return true // the stream ends next; run resumes it
		}
		s.w.send(ctx, s.idx, "", datastore.Event{Type: datastore.EventError, Err: s.c.storeErr(raw)})
		return false
	case watch.Bookmark:
		if acc, err := meta.Accessor(ev.Object); err == nil {
			s.rev = acc.GetResourceVersion()
		}
		return true
	}
	acc, err := meta.Accessor(ev.Object)
	if err != nil {
		return true
	}
	s.rev = acc.GetResourceVersion()
	nk := acc.GetNamespace() + "/" + acc.GetName()
	obj, visible, err := s.src.convert(ev.Object)
	prev := s.last[nk]
	var out []datastore.Event
	switch {
	case err != nil && ev.Type != watch.Deleted:
		// Undecodable: reported, and absent until fixed. The key is the
		// one last delivered, when there was one, so that a consumer
		// holding it can drop it.
		bad := s.src.badRecord(ev.Object, err)
		if prev != nil {
			bad.Key = datastore.KeyOf(prev)
			delete(s.last, nk)
		}
		s.hidden[nk] = true
		out = append(out, datastore.Event{Type: datastore.EventUndecodable, Bad: &bad})
	case ev.Type == watch.Deleted:
		if err != nil && prev == nil {
			// What is known of it: a consumer that noted it as bad
			// forgets it.
			bad := s.src.badRecord(ev.Object, err)
			info, _ := v3.LookupKind(bad.Key.Kind)
			obj = stubOf(info, bad.Key, bad.Revision)
		}
		delete(s.last, nk)
		delete(s.hidden, nk)
		if obj == nil {
			obj = prev
		}
		if obj != nil {
			out = append(out, datastore.Event{Type: datastore.EventDeleted, Object: obj})
		}
	case !visible:
		if prev != nil {
			gone := prev
			if obj != nil && datastore.KeyOf(obj) == datastore.KeyOf(prev) {
				gone = obj
			}
			out = append(out, datastore.Event{Type: datastore.EventDeleted, Object: gone})
			delete(s.last, nk)
		}
		s.hidden[nk] = true
	default:
		switch {
		case prev != nil && datastore.KeyOf(prev) != datastore.KeyOf(obj):
			out = append(out,
				datastore.Event{Type: datastore.EventDeleted, Object: prev},
				datastore.Event{Type: datastore.EventAdded, Object: obj})
		case prev != nil:
			out = append(out, datastore.Event{Type: datastore.EventModified, Object: obj, Previous: prev})
		case ev.Type == watch.Added || s.hidden[nk]:
			out = append(out, datastore.Event{Type: datastore.EventAdded, Object: obj})
		default:
			// Changed, but we never saw it before: it existed before the
			// watch began.
			out = append(out, datastore.Event{Type: datastore.EventModified, Object: obj})
		}
		s.last[nk] = obj
		delete(s.hidden, nk)
	}
	for _, e := range out {
		if !s.w.send(ctx, s.idx, s.rev, e) {
			return false
		}
	}
	return true
}
