package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd/ipamformat"
	"github.com/tabbynet/tabby/datastore/etcd/kvpb"
)

// Config says how to reach etcd, with Calico's settings.
type Config struct {
	// Endpoints (etcdEndpoints) or DiscoverySrv (etcdDiscoverySrv, a
	// domain whose _etcd-client-ssl._tcp / _etcd-client._tcp SRV records
	// list them): exactly one.
	Endpoints    []string
	DiscoverySrv string
	TLS          TLSFiles
	// Username and Password (etcdUsername, etcdPassword) for etcd's
	// authentication.
	Username, Password string
	// DialTimeout bounds connecting (default 5s).
	DialTimeout time.Duration
	// RequestTimeout bounds each request whose context has no deadline
	// (default 10s), so a store that is down yields an error, not a hang.
	RequestTimeout time.Duration
	// NewTransport builds the connection. nil: the hand-written
	// transport of this package (for the once-per-pod CNI plugin);
	// long-running components pass etcdlib.New (etcd's client library).
	NewTransport NewTransportFunc
	// LookupSRV resolves DiscoverySrv (nil: net.LookupSRV).
	LookupSRV func(service, proto, name string) (string, []*net.SRV, error)
}

// Client implements datastore.Client over etcd v3. It is safe for
// concurrent use; all state lives in etcd.
type Client struct {
	gw        Transport
	endpoints []string
	timeout   time.Duration
	tls       *tls.Config // nil without TLS material; for diagnosis
}

var _ datastore.Client = (*Client)(nil)

// New connects to etcd. Connecting is lazy: an unreachable store shows up
// as an UnavailableError on the first request. Configuration mistakes
// (both or neither of endpoints and SRV domain, unreadable certificates,
// a certificate without its key) fail here.
func New(cfg Config) (*Client, error) {
	if cfg.DialTimeout == 0 {
		cfg.DialTimeout = 5 * time.Second
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	endpoints, err := resolveEndpoints(cfg)
	if err != nil {
		return nil, err
	}
	tlsCfg, err := NewTLSConfig(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("etcd datastore: %w", err)
	}
	if cfg.Password != "" && cfg.Username == "" {
		return nil, fmt.Errorf("etcd datastore: etcdPassword is set without etcdUsername")
	}
	newTransport := cfg.NewTransport
	if newTransport == nil {
		newTransport = newGateway
	}
	gw, err := newTransport(TransportConfig{
		Endpoints: endpoints, TLS: tlsCfg, TLSFiles: cfg.TLS, Username: cfg.Username, Password: cfg.Password, DialTimeout: cfg.DialTimeout,
	})
	if err != nil {
		return nil, err
	}
	if tlsCfg == nil {
		tlsCfg = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	return &Client{gw: gw, endpoints: endpoints, timeout: cfg.RequestTimeout, tls: tlsCfg}, nil
}

// Close closes idle connections.
func (c *Client) Close() error {
	c.gw.Close()
	return nil
}

// reqCtx bounds one request by RequestTimeout (or the caller's deadline
// when that is sooner), so a store that hangs yields an error.
func (c *Client) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// storeErr turns a transport failure into an UnavailableError naming the
// endpoints; other errors pass through.
func (c *Client) storeErr(err error) error {
	if err == nil {
		return nil
	}
	if reason, ok := accessProblem(err); ok {
		return &datastore.AccessError{Endpoints: c.endpoints, Reason: reason, Err: err}
	}
	if c.looksUnreachable(err) {
		// A TLS refusal can hide behind "unreachable": look for it.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		if terr := diagnoseTLS(ctx, c.endpoints, c.tls, 2*time.Second); terr != nil {
			if reason, ok := accessProblem(terr); ok {
				return &datastore.AccessError{Endpoints: c.endpoints, Reason: reason, Err: terr}
			}
		}
	}
	if errors.Is(err, kvpb.ErrCompacted) {
		return datastore.ErrRevisionGone
	}
	var ge *kvpb.ServerError
	if errors.As(err, &ge) {
		switch ge.Code {
		case kvpb.CodeUnavailable, kvpb.CodeDeadlineExceeded:
			return &datastore.UnavailableError{Endpoints: c.endpoints, Err: err}
		case kvpb.CodeOutOfRange:
			return datastore.ErrRevisionGone
		}
		return err
	}
	var ue *url.Error
	if errors.As(err, &ue) || errors.Is(err, errUnreachable) || errors.Is(err, errStreamBroken) ||
		errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		// The transport: refused, reset, timed out, canceled.
		return &datastore.UnavailableError{Endpoints: c.endpoints, Err: err}
	}
	return err
}

// looksUnreachable reports a transport failure that may be a TLS refusal
// in disguise (only worth a look with https endpoints).
func (c *Client) looksUnreachable(err error) bool {
	secure := false
	for _, ep := range c.endpoints {
		secure = secure || strings.HasPrefix(ep, "https://") || strings.HasPrefix(ep, "unixs:")
	}
	if !secure || errors.Is(err, context.Canceled) {
		return false
	}
	var se *kvpb.ServerError
	if errors.As(err, &se) {
		return se.Code == kvpb.CodeUnavailable || se.Code == kvpb.CodeDeadlineExceeded
	}
	return true
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
	if ipamformat.IsIPAMKind(v3.KindOf(r)) {
		return encodeIPAM(r)
	}
	c := r.DeepCopyObject().(v3.Resource)
	c.SetResourceVersion("")
	return v3.EncodeJSON(c)
}

// decode reads the object stored in kv; a value that cannot be decoded
// yields a datastore.BadRecord.
func decode(info v3.KindInfo, kv kvpb.KeyValue) (v3.Resource, error) {
	if ipamformat.IsIPAMKind(info.Kind) {
		return decodeIPAMKV(info, kv)
	}
	obj := info.New()
	if err := unmarshalStored(kv.Value, obj); err != nil {
		return nil, badRecord(info, kv, fmt.Errorf("decoding stored %s: %w", info.Kind, err))
	}
	obj.SetResourceVersion(strconv.FormatInt(int64(kv.ModRevision), 10))
	return obj, nil
}

func badRecord(info v3.KindInfo, kv kvpb.KeyValue, err error) datastore.BadRecord {
	return datastore.BadRecord{
		Key:        keyFromStorage(info, string(kv.Key)),
		StorageKey: string(kv.Key),
		Revision:   strconv.FormatInt(int64(kv.ModRevision), 10),
		Err:        err,
	}
}

// stub is what is known of an object whose stored value cannot be
// decoded: its kind, name, namespace and revision.
func stub(info v3.KindInfo, kv kvpb.KeyValue) v3.Resource {
	obj := info.New()
	k := keyFromStorage(info, string(kv.Key))
	obj.SetName(k.Name)
	obj.SetNamespace(k.Namespace)
	obj.SetResourceVersion(strconv.FormatInt(int64(kv.ModRevision), 10))
	return obj
}

func parseRevision(rv string) (int64, error) {
	n, err := strconv.ParseInt(rv, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("resource version %q is not an etcd revision", rv)
	}
	return n, nil
}

// prepareWrite defaults and validates r (datastore.PrepareWrite), refuses
// services matches (felix does not follow Services over etcd:
// v3.ServicesMatches) and finds its etcd key. fail wraps later errors
// with the operation and key.
func prepareWrite(op string, r v3.Resource) (v3.Resource, string, func(error) (v3.Resource, error), error) {
	obj, err := datastore.PrepareWrite(op, r)
	if err != nil {
		return nil, "", nil, err
	}
	if errs := v3.ServicesMatches(obj); len(errs) > 0 {
		return nil, "", nil, &datastore.OpError{Op: op, Key: datastore.KeyOf(obj), Err: &datastore.ValidationError{Errors: errs}}
	}
	k := datastore.KeyOf(obj)
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: op, Key: k, Err: err} }
	info, err := kindInfo(k.Kind)
	if err == nil && ipamformat.IsIPAMKind(info.Kind) {
		var key string
		if key, err = ipamformat.Key(obj); err == nil {
			return obj, key, fail, nil
		}
	} else if err == nil {
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
	if err := datastore.CheckWrite(ctx, c, "create", obj); err != nil {
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
	resp, err := c.gw.Txn(ctx, kvpb.TxnRequest{
		Compare: []kvpb.Compare{kvpb.CreateRevisionIs(key, 0)},
		Success: []kvpb.RequestOp{kvpb.PutOp(key, val)},
	})
	if err != nil {
		return fail(c.storeErr(err))
	}
	if !resp.Succeeded {
		return fail(datastore.ErrAlreadyExists)
	}
	obj.SetResourceVersion(strconv.FormatInt(int64(resp.Header.Revision), 10))
	if ipamformat.IsIPAMKind(v3.KindOf(obj)) {
		// The uid reading it back gives (derived, not stored).
		obj.SetUID(derivedUID(key, int64(resp.Header.Revision)))
	}
	if err := datastore.VerifyCreated(ctx, c, obj); err != nil {
		return nil, err
	}
	return obj, nil
}

// Update implements datastore.Client: a transaction that puts only while
// the key's mod-revision still equals the object's resource version.
func (c *Client) Update(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	obj, key, fail, err := prepareWrite("update", r)
	if err != nil {
		return nil, err
	}
	if err := datastore.CheckWrite(ctx, c, "update", obj); err != nil {
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
	if ts := obj.GetCreationTimestamp(); !ipamformat.IsIPAMKind(v3.KindOf(obj)) && (obj.GetUID() == "" || ts.IsZero()) {
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
	resp, err := c.gw.Txn(ctx, kvpb.TxnRequest{
		Compare: []kvpb.Compare{kvpb.ModRevisionIs(key, rev)},
		Success: []kvpb.RequestOp{kvpb.PutOp(key, val)},
		Failure: []kvpb.RequestOp{{Range: &kvpb.RangeRequest{Key: []byte(key), KeysOnly: true}}},
	})
	if err != nil {
		return fail(c.storeErr(err))
	}
	if !resp.Succeeded {
		if len(resp.Responses) > 0 && resp.Responses[0].Range != nil && len(resp.Responses[0].Range.Kvs) == 0 {
			return fail(datastore.ErrNotFound)
		}
		return fail(datastore.ErrConflict)
	}
	obj.SetResourceVersion(strconv.FormatInt(int64(resp.Header.Revision), 10))
	return obj, nil
}

// Delete implements datastore.Client.
func (c *Client) Delete(ctx context.Context, k datastore.Key, opts datastore.DeleteOptions) (v3.Resource, error) {
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: "delete", Key: k, Err: err} }
	info, err := kindInfo(k.Kind)
	if err != nil {
		return fail(err)
	}
	if err := datastore.CheckDelete(ctx, c, k); err != nil {
		return nil, err
	}
	keys, err := keysFor(info, k)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	key := keys[0]
	if len(keys) > 1 {
		// Which of the keys the name may stand for holds it.
		var bad datastore.BadRecord
		if key, _, err = c.locate(ctx, info, k, keys); err != nil && (key == "" || !errors.As(err, &bad)) {
			return fail(err) // a bad record is deleted all the same
		}
	}
	if opts.UID == "" {
		obj, err := c.deleteByRevision(ctx, info, key, opts.ResourceVersion)
		if err != nil {
			return fail(err)
		}
		return obj, nil
	}
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
		resp, err := c.gw.Txn(ctx, kvpb.TxnRequest{
			Compare: []kvpb.Compare{kvpb.ModRevisionIs(key, rev)},
			Success: []kvpb.RequestOp{kvpb.DeleteOp(key)},
		})
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

// deleteByRevision deletes key in one transaction, guarded by its
// mod-revision when rv is set, and returns what it held: the deleted value
// comes back with the delete, and the failure branch tells a missing key
// from a changed one.
func (c *Client) deleteByRevision(ctx context.Context, info v3.KindInfo, key, rv string) (v3.Resource, error) {
	var guard []kvpb.Compare
	if rv != "" {
		rev, err := parseRevision(rv)
		if err != nil {
			return nil, datastore.ErrConflict // no stored object has it
		}
		guard = []kvpb.Compare{kvpb.ModRevisionIs(key, rev)}
	}
	resp, err := c.gw.Txn(ctx, kvpb.TxnRequest{
		Compare: guard,
		Success: []kvpb.RequestOp{kvpb.DeleteReturningOp(key)},
		Failure: []kvpb.RequestOp{{Range: &kvpb.RangeRequest{Key: []byte(key), KeysOnly: true}}},
	})
	if err != nil {
		return nil, c.storeErr(err)
	}
	if len(resp.Responses) != 1 {
		return nil, fmt.Errorf("etcd: %d responses to a one-operation transaction", len(resp.Responses))
	}
	op := resp.Responses[0]
	switch {
	case resp.Succeeded && op.Delete != nil && len(op.Delete.PrevKvs) > 0:
		prev := op.Delete.PrevKvs[0]
		obj, err := decode(info, prev)
		if err != nil {
			// Deleted all the same (the way to be rid of a bad record):
			// what it held cannot be told, only where it was.
			return stub(info, prev), nil
		}
		return obj, nil
	case resp.Succeeded:
		return nil, datastore.ErrNotFound
	case op.Range != nil && len(op.Range.Kvs) > 0:
		return nil, datastore.ErrConflict
	default:
		return nil, datastore.ErrNotFound
	}
}

// Get implements datastore.Client.
func (c *Client) Get(ctx context.Context, k datastore.Key) (v3.Resource, error) {
	info, err := kindInfo(k.Kind)
	if err != nil {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: err}
	}
	keys, err := keysFor(info, k)
	if err != nil {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: err}
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	var obj v3.Resource
	if len(keys) == 1 {
		obj, err = c.getRaw(ctx, info, keys[0])
	} else {
		_, obj, err = c.locate(ctx, info, k, keys)
	}
	if err != nil {
		return nil, &datastore.OpError{Op: "get", Key: k, Err: err}
	}
	return obj, nil
}

func (c *Client) getRaw(ctx context.Context, info v3.KindInfo, key string) (v3.Resource, error) {
	resp, err := c.gw.Range(ctx, kvpb.RangeRequest{Key: []byte(key)})
	if err != nil {
		return nil, c.storeErr(err)
	}
	if len(resp.Kvs) == 0 {
		return nil, datastore.ErrNotFound
	}
	return decode(info, resp.Kvs[0])
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
	if err := checkNode(kind, opts.Node); err != nil {
		return fail(err)
	}
	keep := ofNode(opts.Node, func(obj v3.Resource) bool { return sel.Evaluate(obj.GetLabels()) })
	if ipamformat.IsIPAMKind(kind) {
		kvs, rev, err := c.readRanges(ctx, ipamListOps(kind, opts.Node))
		if err != nil {
			return fail(err)
		}
		return decodeList(info, kvs, rev, keep), nil
	}
	prefix := listPrefix(info, opts.Namespace)
	resp, err := c.gw.Range(ctx, kvpb.RangeRequest{Key: []byte(prefix), RangeEnd: kvpb.PrefixEnd(prefix)})
	if err != nil {
		return fail(c.storeErr(err))
	}
	return decodeList(info, resp.Kvs, int64(resp.Header.Revision), keep), nil
}

// ListPages implements datastore.PageLister: the kind's records in pages
// of pageSize (in storage order), all read at the revision of the first.
// The IPAM kinds, stored in libcalico-go's own layout, are listed whole
// (one page).
func (c *Client) ListPages(ctx context.Context, kind string, pageSize int, page func(*datastore.List) error) error {
	k := datastore.Key{Kind: kind}
	fail := func(err error) error { return &datastore.OpError{Op: "list", Key: k, Err: err} }
	info, err := kindInfo(kind)
	if err != nil {
		return fail(err)
	}
	if ipamformat.IsIPAMKind(kind) || pageSize <= 0 {
		l, err := c.List(ctx, kind, datastore.ListOptions{})
		if err != nil {
			return err
		}
		return page(l)
	}
	keep := func(v3.Resource) bool { return true }
	prefix := listPrefix(info, "")
	from, end := []byte(prefix), kvpb.PrefixEnd(prefix)
	var rev kvpb.Rev
	total := 0
	for {
		rctx, cancel := c.reqCtx(ctx)
		resp, err := c.gw.Range(rctx, kvpb.RangeRequest{Key: from, RangeEnd: end, Limit: int64(pageSize), Revision: rev})
		cancel()
		if err != nil {
			return fail(c.storeErr(err))
		}
		if rev == 0 {
			rev = resp.Header.Revision
		}
		l := decodeList(info, resp.Kvs, int64(rev), keep)
		if total == 0 {
			// The first page counts the whole range (later pages count
			// only what is left).
			total = int(resp.Count)
		}
		l.Total = total
		if err := page(l); err != nil {
			return err
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return nil
		}
		last := resp.Kvs[len(resp.Kvs)-1].Key
		from = append(append([]byte(nil), last...), 0)
	}
}

// decodeList decodes listed key-values into a List sorted by namespace
// then name, keeping the objects keep accepts. Values that cannot be
// decoded go to the list's Bad, whatever keep says.
func decodeList(info v3.KindInfo, kvs []kvpb.KeyValue, rev int64, keep func(v3.Resource) bool) *datastore.List {
	out := &datastore.List{Revision: strconv.FormatInt(rev, 10)}
	objs, errs := decodeAll(info, kvs)
	for i := range kvs {
		obj, err := objs[i], errs[i]
		var bad datastore.BadRecord
		if errors.As(err, &bad) {
			out.Bad = append(out.Bad, bad)
			continue
		}
		if keep(obj) {
			out.Items = append(out.Items, obj)
		}
	}
	datastore.Sort(out.Items)
	return out
}

// decodeAll decodes kvs, in parallel when there are many (a cluster's
// endpoints: decoding is most of a large list's cost).
func decodeAll(info v3.KindInfo, kvs []kvpb.KeyValue) ([]v3.Resource, []error) {
	objs := make([]v3.Resource, len(kvs))
	errs := make([]error, len(kvs))
	workers := min(runtime.GOMAXPROCS(0), len(kvs)/parallelDecodeMin)
	if workers < 2 {
		for i, kv := range kvs {
			objs[i], errs[i] = decode(info, kv)
		}
		return objs, errs
	}
	var wg sync.WaitGroup
	chunk := (len(kvs) + workers - 1) / workers
	for from := 0; from < len(kvs); from += chunk {
		to := min(from+chunk, len(kvs))
		wg.Go(func() {
			for i := from; i < to; i++ {
				objs[i], errs[i] = decode(info, kvs[i])
			}
		})
	}
	wg.Wait()
	return objs, errs
}

// parallelDecodeMin is the number of records per extra decoding goroutine.
const parallelDecodeMin = 1000

// Watch implements datastore.Client.
func (c *Client) Watch(ctx context.Context, kind string, opts datastore.WatchOptions) (datastore.Watcher, error) {
	k := datastore.Key{Kind: kind, Namespace: opts.Namespace}
	info, err := kindInfo(kind)
	if err != nil {
		return nil, &datastore.OpError{Op: "watch", Key: k, Err: err}
	}
	var from int64
	if opts.Revision != "" {
		rev, err := parseRevision(opts.Revision)
		if err != nil {
			return nil, &datastore.OpError{Op: "watch", Key: k, Err: err}
		}
		from = rev + 1
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watcher{cancel: cancel, out: make(chan datastore.Event, 64)}
	prefix := listPrefix(info, opts.Namespace)
	if ipamformat.IsIPAMKind(kind) {
		prefix = ipamWatchPrefix(kind)
	}
	go w.run(wctx, info, prefix, from, c)
	return w, nil
}

type watcher struct {
	cancel context.CancelFunc
	out    chan datastore.Event
}

func (w *watcher) ResultChan() <-chan datastore.Event { return w.out }
func (w *watcher) Stop()                              { w.cancel() }

func (w *watcher) run(ctx context.Context, info v3.KindInfo, prefix string, from int64, c *Client) {
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
	err := c.gw.Watch(ctx, prefix, from, func(resp *kvpb.WatchResponse) bool {
		for _, ev := range resp.Events {
			if out, ok := decodeEvent(info, ev); ok && !send(out) {
				return false
			}
		}
		return true
	})
	switch {
	case ctx.Err() != nil:
	case err != nil:
		send(datastore.Event{Type: datastore.EventError, Err: c.storeErr(err)})
	default:
		send(datastore.Event{Type: datastore.EventError, Err: &datastore.UnavailableError{Endpoints: c.endpoints, Err: errors.New("watch closed")}})
	}
}

// decodeEvent turns one etcd change into a datastore event; ok is false
// for a deletion whose previous value history no longer holds. A value
// that cannot be decoded yields an EventUndecodable; a deletion whose
// previous value cannot be decoded carries what is known of it (stub).
func decodeEvent(info v3.KindInfo, ev kvpb.WatchEvent) (out datastore.Event, ok bool) {
	if ipamformat.IsIPAMKind(info.Kind) {
		if _, owned, _ := ipamformat.ParseKey(info.Kind, string(ev.Kv.Key)); !owned {
			return out, false // another IPAM kind's key under the watched prefix
		}
	}
	out.Revision = strconv.FormatInt(int64(ev.Kv.ModRevision), 10)
	if ev.Type == "DELETE" {
		out.Type = datastore.EventDeleted
		if ev.PrevKv == nil {
			return out, false
		}
		var err error
		if out.Object, err = decode(info, *ev.PrevKv); err != nil {
			out.Object = stub(info, *ev.PrevKv)
			out.Object.SetResourceVersion(out.Revision)
		}
		return out, true
	}
	obj, err := decode(info, ev.Kv)
	var bad datastore.BadRecord
	if errors.As(err, &bad) {
		return datastore.Event{Type: datastore.EventUndecodable, Revision: out.Revision, Bad: &bad}, true
	}
	out.Object = obj
	out.Type = datastore.EventAdded
	if ev.Kv.CreateRevision != ev.Kv.ModRevision {
		out.Type = datastore.EventModified
		if ev.PrevKv != nil {
			out.Previous, _ = decode(info, *ev.PrevKv) // nil when it was bad
		}
	}
	return out, true
}

// DecodeRecord decodes value, stored at etcd key key at modRevision, as
// an object of kind, exactly as the client's reads do: a value that cannot
// be decoded yields a datastore.BadRecord error. For tools and fuzzing.
func DecodeRecord(kind, key string, value []byte, modRevision int64) (v3.Resource, error) {
	info, err := kindInfo(kind)
	if err != nil {
		return nil, err
	}
	return decode(info, kvpb.KeyValue{Key: []byte(key), Value: value, ModRevision: kvpb.Rev(modRevision), CreateRevision: kvpb.Rev(modRevision)})
}

// KeyOf returns the etcd key of the object k, for tools and tests that
// write the store directly.
func KeyOf(k datastore.Key) (string, error) {
	info, err := kindInfo(k.Kind)
	if err != nil {
		return "", err
	}
	return keyFor(info, k)
}
