package etcd

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	kjson "sigs.k8s.io/json"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Config says how to reach etcd.
type Config struct {
	Endpoints []string
	// DialTimeout bounds connecting (default 5s).
	DialTimeout time.Duration
	// RequestTimeout bounds each request whose context has no deadline
	// (default 10s), so a store that is down yields an error, not a hang.
	RequestTimeout time.Duration
}

// Client implements datastore.Client over etcd v3. It is safe for
// concurrent use; all state lives in etcd.
type Client struct {
	cli       *clientv3.Client
	endpoints []string
	timeout   time.Duration
}

var _ datastore.Client = (*Client)(nil)

// New connects to etcd. Connecting is lazy: an unreachable store shows up
// as an UnavailableError on the first request.
func New(cfg Config) (*Client, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("etcd datastore: no endpoints configured (set etcd_endpoints / ETCD_ENDPOINTS)")
	}
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   cfg.Endpoints,
		DialTimeout: cfg.DialTimeout,
		Logger:      quietLogger(),
	})
	if err != nil {
		return nil, &datastore.UnavailableError{Endpoints: cfg.Endpoints, Err: err}
	}
	return &Client{cli: cli, endpoints: cfg.Endpoints, timeout: cfg.RequestTimeout}, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.cli.Close() }

// reqCtx bounds one request by RequestTimeout (or the caller's deadline
// when that is sooner): etcd's client waits for a connection rather than
// failing, so without a bound a store that is down looks like a hang.
func (c *Client) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// storeErr turns a transport failure into an UnavailableError naming the
// endpoints; other errors pass through.
func (c *Client) storeErr(err error) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &datastore.UnavailableError{Endpoints: c.endpoints, Err: err}
	}
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded:
		return &datastore.UnavailableError{Endpoints: c.endpoints, Err: err}
	}
	return err
}

func kindInfo(kind string) (v3.KindInfo, error) {
	info, ok := v3.LookupKind(kind)
	if !ok {
		return v3.KindInfo{}, fmt.Errorf("%w %q", v3.ErrUnknownKind, kind)
	}
	return info, nil
}

// encode renders an object for storage: its resource version is not
// stored (it is the key's mod-revision).
func encode(r v3.Resource) ([]byte, error) {
	c := r.DeepCopyObject().(v3.Resource)
	c.SetResourceVersion("")
	return v3.EncodeJSON(c)
}

func decode(info v3.KindInfo, val []byte, modRev int64) (v3.Resource, error) {
	obj := info.New()
	if err := kjson.UnmarshalCaseSensitivePreserveInts(val, obj); err != nil {
		return nil, fmt.Errorf("decoding stored %s: %w", info.Kind, err)
	}
	obj.SetResourceVersion(strconv.FormatInt(modRev, 10))
	return obj, nil
}

func parseRevision(rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("resource version %q is not an etcd revision", rv)
	}
	return n, nil
}

// prepareWrite defaults and validates r (datastore.PrepareWrite) and finds
// its etcd key. fail wraps later errors with the operation and key.
func prepareWrite(op string, r v3.Resource) (v3.Resource, string, func(error) (v3.Resource, error), error) {
	obj, err := datastore.PrepareWrite(op, r)
	if err != nil {
		return nil, "", nil, err
	}
	k := datastore.KeyOf(obj)
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: op, Key: k, Err: err} }
	info, err := kindInfo(k.Kind)
	if err == nil {
		var key string
		if key, err = keyFor(info, k); err == nil {
			return obj, key, fail, nil
		}
	}
	_, err = fail(err)
	return nil, "", nil, err
}

// Create implements datastore.Client.
func (c *Client) Create(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	obj, key, fail, err := prepareWrite("create", r)
	if err != nil {
		return nil, err
	}
	obj.SetResourceVersion("")
	obj.SetUID(uuid.NewUUID())
	obj.SetCreationTimestamp(metav1.Now())
	val, err := encode(obj)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(val))).
		Commit()
	if err != nil {
		return fail(c.storeErr(err))
	}
	if !resp.Succeeded {
		return fail(datastore.ErrAlreadyExists)
	}
	obj.SetResourceVersion(strconv.FormatInt(resp.Header.Revision, 10))
	return obj, nil
}

// Update implements datastore.Client: a transaction that puts only while
// the key's mod-revision still equals the object's resource version.
func (c *Client) Update(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	obj, key, fail, err := prepareWrite("update", r)
	if err != nil {
		return nil, err
	}
	if obj.GetResourceVersion() == "" {
		return fail(&datastore.ValidationError{Errors: v3.ErrorList{{Path: "metadata.resourceVersion", Msg: "is required for an update (read the object first)"}}})
	}
	rev, err := parseRevision(obj.GetResourceVersion())
	if err != nil {
		return fail(err)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	if ts := obj.GetCreationTimestamp(); obj.GetUID() == "" || ts.IsZero() {
		// Identity fields are immutable: take them from the stored object.
		info, _ := v3.LookupKind(v3.KindOf(obj)) // known: prepareWrite checked it
		cur, err := c.getRaw(ctx, info, key)
		if err != nil {
			return fail(err)
		}
		obj.SetUID(cur.GetUID())
		obj.SetCreationTimestamp(cur.GetCreationTimestamp())
	}
	val, err := encode(obj)
	if err != nil {
		return fail(err)
	}
	resp, err := c.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
		Then(clientv3.OpPut(key, string(val))).
		Else(clientv3.OpGet(key, clientv3.WithKeysOnly())).
		Commit()
	if err != nil {
		return fail(c.storeErr(err))
	}
	if !resp.Succeeded {
		if len(resp.Responses) > 0 && len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			return fail(datastore.ErrNotFound)
		}
		return fail(datastore.ErrConflict)
	}
	obj.SetResourceVersion(strconv.FormatInt(resp.Header.Revision, 10))
	return obj, nil
}

// Delete implements datastore.Client.
func (c *Client) Delete(ctx context.Context, k datastore.Key, opts datastore.DeleteOptions) (v3.Resource, error) {
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: "delete", Key: k, Err: err} }
	info, err := kindInfo(k.Kind)
	if err != nil {
		return fail(err)
	}
	key, err := keyFor(info, k)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	for attempt := 0; ; attempt++ {
		cur, err := c.getRaw(ctx, info, key)
		if err != nil {
			return fail(err)
		}
		if opts.ResourceVersion != "" && cur.GetResourceVersion() != opts.ResourceVersion {
			return fail(datastore.ErrConflict)
		}
		if opts.UID != "" && string(cur.GetUID()) != opts.UID {
			return fail(datastore.ErrConflict)
		}
		rev, _ := parseRevision(cur.GetResourceVersion())
		resp, err := c.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(key), "=", rev)).
			Then(clientv3.OpDelete(key)).
			Commit()
		if err != nil {
			return fail(c.storeErr(err))
		}
		if resp.Succeeded {
			return cur, nil
		}
		if opts.ResourceVersion != "" || opts.UID != "" || attempt >= 5 {
			return fail(datastore.ErrConflict)
		}
		// Changed between our read and delete, without preconditions:
		// delete the newer state.
	}
}

// Get implements datastore.Client.
func (c *Client) Get(ctx context.Context, k datastore.Key) (v3.Resource, error) {
	info, err := kindInfo(k.Kind)
	if err != nil {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: err}
	}
	key, err := keyFor(info, k)
	if err != nil {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: err}
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	obj, err := c.getRaw(ctx, info, key)
	if err != nil {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: err}
	}
	return obj, nil
}

func (c *Client) getRaw(ctx context.Context, info v3.KindInfo, key string) (v3.Resource, error) {
	resp, err := c.cli.Get(ctx, key)
	if err != nil {
		return nil, c.storeErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, datastore.ErrNotFound
	}
	return decode(info, resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
}

// List implements datastore.Client.
func (c *Client) List(ctx context.Context, kind string, opts datastore.ListOptions) (*datastore.List, error) {
	k := datastore.Key{Kind: kind, Namespace: opts.Namespace}
	fail := func(err error) (*datastore.List, error) { return nil, &datastore.OpError{Op: "list", Key: k, Err: err} }
	info, err := kindInfo(kind)
	if err != nil {
		return fail(err)
	}
	sel, err := selector.Parse(opts.Selector)
	if err != nil {
		return fail(fmt.Errorf("%w: %v", datastore.ErrInvalid, err))
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	resp, err := c.cli.Get(ctx, listPrefix(info, opts.Namespace), clientv3.WithPrefix())
	if err != nil {
		return fail(c.storeErr(err))
	}
	out, err := decodeList(info, resp.Kvs, resp.Header.Revision, func(obj v3.Resource) bool { return sel.Evaluate(obj.GetLabels()) })
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// decodeList decodes listed key-values into a List sorted by namespace then
// name, keeping the objects keep accepts.
func decodeList(info v3.KindInfo, kvs []*mvccpb.KeyValue, rev int64, keep func(v3.Resource) bool) (*datastore.List, error) {
	out := &datastore.List{Revision: strconv.FormatInt(rev, 10)}
	for _, kv := range kvs {
		obj, err := decode(info, kv.Value, kv.ModRevision)
		if err != nil {
			return nil, err
		}
		if keep(obj) {
			out.Items = append(out.Items, obj)
		}
	}
	sort.Slice(out.Items, func(i, j int) bool {
		a, b := out.Items[i], out.Items[j]
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	return out, nil
}

// Watch implements datastore.Client.
func (c *Client) Watch(ctx context.Context, kind string, opts datastore.WatchOptions) (datastore.Watcher, error) {
	k := datastore.Key{Kind: kind, Namespace: opts.Namespace}
	info, err := kindInfo(kind)
	if err != nil {
		return nil, &datastore.OpError{Op: "watch", Key: k, Err: err}
	}
	wopts := []clientv3.OpOption{clientv3.WithPrefix(), clientv3.WithPrevKV()}
	if opts.Revision != "" {
		rev, err := parseRevision(opts.Revision)
		if err != nil {
			return nil, &datastore.OpError{Op: "watch", Key: k, Err: err}
		}
		wopts = append(wopts, clientv3.WithRev(rev+1))
	}
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	w := &watcher{cancel: cancel, out: make(chan datastore.Event, 64)}
	wch := c.cli.Watch(wctx, listPrefix(info, opts.Namespace), wopts...)
	go w.run(wctx, info, wch, c)
	return w, nil
}

type watcher struct {
	cancel context.CancelFunc
	out    chan datastore.Event
}

func (w *watcher) ResultChan() <-chan datastore.Event { return w.out }
func (w *watcher) Stop()                              { w.cancel() }

func (w *watcher) run(ctx context.Context, info v3.KindInfo, wch clientv3.WatchChan, c *Client) {
	defer close(w.out)
	defer w.cancel()
	send := func(ev datastore.Event) bool {
		select {
		case w.out <- ev:
			return true
		case <-ctx.Done():
			return false
		}
	}
	for resp := range wch {
		if resp.CompactRevision != 0 || errors.Is(resp.Err(), rpctypes.ErrCompacted) {
			send(datastore.Event{Type: datastore.EventError, Err: datastore.ErrRevisionGone})
			return
		}
		if err := resp.Err(); err != nil {
			send(datastore.Event{Type: datastore.EventError, Err: c.storeErr(err)})
			return
		}
		for _, ev := range resp.Events {
			out := datastore.Event{Revision: strconv.FormatInt(ev.Kv.ModRevision, 10)}
			var err error
			switch {
			case ev.Type == clientv3.EventTypeDelete:
				out.Type = datastore.EventDeleted
				if ev.PrevKv == nil {
					continue // history without the previous value: nothing to report
				}
				out.Object, err = decode(info, ev.PrevKv.Value, ev.PrevKv.ModRevision)
			case ev.IsCreate():
				out.Type = datastore.EventAdded
				out.Object, err = decode(info, ev.Kv.Value, ev.Kv.ModRevision)
			default:
				out.Type = datastore.EventModified
				out.Object, err = decode(info, ev.Kv.Value, ev.Kv.ModRevision)
				if err == nil && ev.PrevKv != nil {
					out.Previous, err = decode(info, ev.PrevKv.Value, ev.PrevKv.ModRevision)
				}
			}
			if err != nil {
				send(datastore.Event{Type: datastore.EventError, Err: err})
				return
			}
			if !send(out) {
				return
			}
		}
	}
	if ctx.Err() == nil {
		send(datastore.Event{Type: datastore.EventError, Err: &datastore.UnavailableError{Endpoints: c.endpoints, Err: errors.New("watch closed")}})
	}
}
