package kdd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// Config says how to reach the Kubernetes API server.
type Config struct {
	// REST is a ready client configuration; when nil, Kubeconfig is read.
	REST *rest.Config
	// Kubeconfig is a kubeconfig path; empty means $KUBECONFIG,
	// ~/.kube/config, or the in-cluster service account, in that order.
	Kubeconfig string
	// RequestTimeout bounds each request whose context has no deadline
	// (default 10s), so a server that is down yields an error, not a hang.
	RequestTimeout time.Duration
	// QPS and Burst limit the client's request rate (defaults 100 and
	// 200; a negative QPS disables the limit).
	QPS   float32
	Burst int
	// OneConnection sends every request over one HTTP/2 connection,
	// dialled once (see OneConnection): for one-call processes (the CNI
	// plugin), whose first requests start together.
	OneConnection bool
	// TLSSessionFile, with OneConnection, keeps the TLS session in this
	// file for the next process to resume instead of a full handshake
	// (see tlssession.go).
	TLSSessionFile string
}

// Client implements datastore.Client over the Kubernetes API. It is safe
// for concurrent use; it holds no state beyond its connections.
type Client struct {
	native   *natives // pods, namespaces, nodes, ... (natives.go)
	dyn      dynamic.Interface
	meta     metadata.Interface // object metadata only (ListNames)
	endpoint string
	timeout  time.Duration
	kinds    map[string]*kindBackend
	// partial reports derived policies converted with rules failing
	// closed (ClusterNetworkPolicies).
	partial *datastore.PartialReporter
	// qps is the client's request rate limit (QPS, burst), as configured.
	qps [2]float32
}

var (
	_ datastore.Client       = (*Client)(nil)
	_ datastore.CachedGetter = (*Client)(nil)
)

// New builds a client. Connecting is lazy: an unreachable server shows up
// as an UnavailableError on the first request.
func New(cfg Config) (*Client, error) {
	rc := cfg.REST
	if rc == nil {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = cfg.Kubeconfig
		var err error
		rc, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubernetes datastore: no usable kubeconfig (set kubeconfig / KUBECONFIG, or run in a pod): %w", err)
		}
	}
	rc = rest.CopyConfig(rc)
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = 10 * time.Second
	}
	rc.QPS, rc.Burst = cfg.QPS, cfg.Burst
	if rc.QPS == 0 {
		rc.QPS, rc.Burst = 100, 200
	}
	if rc.UserAgent == "" {
		rc.UserAgent = "tabby"
	}
	if rc.Dial == nil {
		// Bound connecting; a request's own deadline bounds the rest.
		rc.Dial = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	if cfg.OneConnection {
		var err error
		if rc, err = OneConnection(rc, cfg.TLSSessionFile); err != nil {
			return nil, fmt.Errorf("kubernetes datastore: %w", err)
		}
	}
	// One HTTP client (transport, credentials) for every API group.
	httpClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes datastore: %w", err)
	}
	dyn, err := dynamic.NewForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes datastore: %w", err)
	}
	native, err := newNatives(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes datastore: %w", err)
	}
	meta, err := metadata.NewForConfigAndClient(rc, httpClient)
	if err != nil {
		return nil, fmt.Errorf("kubernetes datastore: %w", err)
	}
	c := &Client{native: native, dyn: dyn, meta: meta, endpoint: rc.Host, timeout: cfg.RequestTimeout, qps: [2]float32{rc.QPS, float32(rc.Burst)}, partial: &datastore.PartialReporter{}}
	c.kinds = c.backends()
	return c, nil
}

// Close implements datastore.Client; connections are pooled by client-go
// and need no explicit release.
func (c *Client) Close() error { return nil }

func (c *Client) reqCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, c.timeout)
}

func (c *Client) backend(kind string) (*kindBackend, error) {
	kb, ok := c.kinds[kind]
	if !ok {
		return nil, fmt.Errorf("%w %q", v3.ErrUnknownKind, kind)
	}
	return kb, nil
}

// locateWrite finds where a write to k goes, refusing keys without the
// namespace their kind needs and objects derived from native resources.
func (c *Client) locateWrite(k datastore.Key) (*kindBackend, location, error) {
	kb, err := c.backend(k.Kind)
	if err != nil {
		return nil, location{}, err
	}
	if kb.info.Namespaced && k.Namespace == "" {
		return nil, location{}, &datastore.ValidationError{Errors: v3.ErrorList{{Path: "metadata.namespace", Msg: "is required for " + k.Kind}}}
	}
	loc, err := kb.locate(k)
	if err != nil {
		return nil, location{}, err
	}
	return kb, loc, nil
}

func readOnly(why string) error { return fmt.Errorf("%w: %s", datastore.ErrReadOnly, why) }

// Create implements datastore.Client.
func (c *Client) Create(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	obj, err := datastore.PrepareWrite("create", r)
	if err != nil {
		return nil, err
	}
	if err := datastore.CheckWrite(ctx, c, "create", obj); err != nil {
		return nil, err
	}
	k := datastore.KeyOf(obj)
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: "create", Key: k, Err: err} }
	kb, loc, err := c.locateWrite(k)
	if err != nil {
		return fail(err)
	}
	if loc.readOnly != "" {
		return fail(readOnly(loc.readOnly))
	}
	obj.SetResourceVersion("")
	obj.SetUID("")
	obj.SetCreationTimestamp(metav1.Time{})
	u, err := toCR(obj)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	ri := c.crd(kb, loc.ns)
	got, err := ri.Create(ctx, u, metav1.CreateOptions{FieldValidation: "Strict"})
	out, err := c.written(ctx, kb, ri, u, got, err)
	if err != nil {
		return fail(err)
	}
	if err := datastore.VerifyCreated(ctx, c, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Update implements datastore.Client: the API server's own optimistic
// concurrency on resourceVersion is the compare-and-swap.
func (c *Client) Update(ctx context.Context, r v3.Resource) (v3.Resource, error) {
	obj, err := datastore.PrepareWrite("update", r)
	if err != nil {
		return nil, err
	}
	if err := datastore.CheckWrite(ctx, c, "update", obj); err != nil {
		return nil, err
	}
	k := datastore.KeyOf(obj)
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: "update", Key: k, Err: err} }
	if obj.GetResourceVersion() == "" {
		return fail(&datastore.ValidationError{Errors: v3.ErrorList{{Path: "metadata.resourceVersion", Msg: "is required for an update (read the object first)"}}})
	}
	kb, loc, err := c.locateWrite(k)
	if err != nil {
		return fail(err)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	if kb.updateNative != nil {
		out, err := kb.updateNative(ctx, obj)
		if err != nil {
			return fail(c.storeErr(err))
		}
		return out, nil
	}
	if loc.readOnly != "" {
		return fail(readOnly(loc.readOnly))
	}
	u, err := toCR(obj)
	if err != nil {
		return fail(err)
	}
	ri := c.crd(kb, loc.ns)
	got, err := ri.Update(ctx, u, metav1.UpdateOptions{FieldValidation: "Strict"})
	if legacy, ok := legacyPolicyCRName(k); ok && apierrors.IsNotFound(err) {
		// Written by an older release under its legacy name.
		u.SetName(legacy)
		got, err = ri.Update(ctx, u, metav1.UpdateOptions{FieldValidation: "Strict"})
	}
	out, err := c.written(ctx, kb, ri, u, got, err)
	if err != nil {
		return fail(err)
	}
	return out, nil
}

// written finishes a create or update the API server answered: the status
// (writeStatus), then the object as stored.
func (c *Client) written(ctx context.Context, kb *kindBackend, ri dynamic.ResourceInterface, sent, got *unstructured.Unstructured, err error) (v3.Resource, error) {
	if err != nil {
		return nil, c.storeErr(err)
	}
	if got, err = c.writeStatus(ctx, ri, sent, got); err != nil {
		return nil, err
	}
	return fromCR(kb.info, got)
}

// writeStatus stores the status the caller asked for when the kind has a
// status subresource (the API server then ignores status in a create or
// update of the object itself): a second, compare-and-swap write.
func (c *Client) writeStatus(ctx context.Context, ri dynamic.ResourceInterface, sent, got *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	want, ok := sent.Object["status"]
	if !ok || reflect.DeepEqual(want, got.Object["status"]) {
		return got, nil
	}
	got = got.DeepCopy()
	got.Object["status"] = want
	out, err := ri.UpdateStatus(ctx, got, metav1.UpdateOptions{FieldValidation: "Strict"})
	if err != nil {
		return nil, fmt.Errorf("writing status: %w", c.storeErr(err))
	}
	return out, nil
}

// Delete implements datastore.Client. It reads the object, checks the
// caller's preconditions, then deletes with the read version and UID as
// the API server's preconditions, so the state returned is exactly the
// state deleted.
func (c *Client) Delete(ctx context.Context, k datastore.Key, opts datastore.DeleteOptions) (v3.Resource, error) {
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: "delete", Key: k, Err: err} }
	kb, loc, err := c.locateWrite(k)
	if err != nil {
		return fail(err)
	}
	if loc.readOnly != "" {
		return fail(readOnly(loc.readOnly))
	}
	if err := datastore.CheckDelete(ctx, c, k); err != nil {
		return nil, err
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	ri := c.crd(kb, loc.ns)
	for attempt := 0; ; attempt++ {
		cur, err := ri.Get(ctx, loc.name, metav1.GetOptions{})
		if legacy, ok := legacyPolicyCRName(k); ok && apierrors.IsNotFound(err) {
			if cur, err = ri.Get(ctx, legacy, metav1.GetOptions{}); err == nil {
				loc.name = legacy
			}
		}
		if err != nil {
			return fail(c.storeErr(err))
		}
		obj, err := fromCR(kb.info, cur)
		if err != nil {
			// An undecodable record can be deleted (that is how to be
			// rid of it) but not checked against preconditions beyond
			// its resource version.
			bad := kb.sources[0].badRecord(cur, err)
			if opts.UID != "" {
				return fail(bad)
			}
			obj = stubOf(kb.info, k, cur.GetResourceVersion())
		}
		if obj.GetName() != k.Name {
			return fail(datastore.ErrNotFound)
		}
		if opts.ResourceVersion != "" && obj.GetResourceVersion() != opts.ResourceVersion {
			return fail(datastore.ErrConflict)
		}
		if opts.UID != "" && string(obj.GetUID()) != opts.UID {
			return fail(datastore.ErrConflict)
		}
		rv, uid := cur.GetResourceVersion(), cur.GetUID()
		err = ri.Delete(ctx, loc.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv, UID: &uid}})
		if err == nil {
			return obj, nil
		}
		err = c.storeErr(err)
		if !errors.Is(err, datastore.ErrConflict) && !errors.Is(err, datastore.ErrNotFound) {
			return fail(err)
		}
		if opts.ResourceVersion != "" || opts.UID != "" || attempt >= 5 {
			return fail(err)
		}
		// Changed or gone between our read and delete, without
		// preconditions: go again (delete the newer state, or report
		// not found).
	}
}

// Get implements datastore.Client.
func (c *Client) Get(ctx context.Context, k datastore.Key) (v3.Resource, error) {
	return c.get(ctx, k, metav1.GetOptions{})
}

// GetCached implements datastore.CachedGetter: the API server answers
// from its watch cache as it is (resourceVersion 0), without a read
// from etcd: a fraction of the time and of the server's work, and
// possibly a little behind.
func (c *Client) GetCached(ctx context.Context, k datastore.Key) (v3.Resource, error) {
	return c.get(ctx, k, metav1.GetOptions{ResourceVersion: "0"})
}

func (c *Client) get(ctx context.Context, k datastore.Key, o metav1.GetOptions) (v3.Resource, error) {
	fail := func(err error) (v3.Resource, error) { return nil, &datastore.OpError{Op: "get", Key: k, Err: err} }
	kb, err := c.backend(k.Kind)
	if err != nil {
		return fail(err)
	}
	if kb.info.Namespaced && k.Namespace == "" {
		return fail(fmt.Errorf("a namespace is required for %s", k.Kind))
	}
	loc, err := kb.locate(k)
	if err != nil {
		return fail(err)
	}
	if loc.static != nil {
		return loc.static.DeepCopyObject().(v3.Resource), nil
	}
	if loc.src == nil {
		return fail(datastore.ErrNotFound)
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	raw, err := loc.src.get(ctx, loc.ns, loc.name, o)
	if legacy, ok := legacyPolicyCRName(k); ok && loc.src.gvr.Group == v3.CRDGroup && apierrors.IsNotFound(err) {
		raw, err = loc.src.get(ctx, loc.ns, legacy, o)
	}
	if err != nil {
		return fail(c.storeErr(err))
	}
	obj, visible, err := loc.src.convert(raw)
	if err != nil {
		return fail(loc.src.badRecord(raw, err))
	}
	if !visible || obj.GetName() != k.Name || obj.GetNamespace() != k.Namespace {
		return fail(datastore.ErrNotFound)
	}
	return obj, nil
}

// List implements datastore.Client: each source of the kind is listed
// (paginated, each a consistent snapshot), the selector is evaluated here
// as in the etcd backend, and the revision combines the sources'.
func (c *Client) List(ctx context.Context, kind string, opts datastore.ListOptions) (*datastore.List, error) {
	k := datastore.Key{Kind: kind, Namespace: opts.Namespace}
	fail := func(err error) (*datastore.List, error) { return nil, &datastore.OpError{Op: "list", Key: k, Err: err} }
	kb, err := c.backend(kind)
	if err != nil {
		return fail(err)
	}
	sel, err := selector.Parse(opts.Selector)
	if err != nil {
		return fail(fmt.Errorf("%w: %v", datastore.ErrInvalid, err))
	}
	if err := datastore.CheckNode(kind, opts.Node); err != nil {
		return fail(err)
	}
	labelSel, keep := nodeFilter(opts.Node)
	ns := opts.Namespace
	if !kb.info.Namespaced {
		ns = ""
	}
	ctx, cancel := c.reqCtx(ctx)
	defer cancel()
	out := &datastore.List{}
	revs := make([]string, len(kb.sources))
	for i, src := range kb.sources {
		items, bad, rev, err := c.listSource(ctx, src, ns, labelSel, opts.Cached)
		if err != nil {
			return fail(err)
		}
		revs[i] = rev
		out.Bad = append(out.Bad, bad...)
		for _, it := range items {
			if keep(it) && sel.Evaluate(it.GetLabels()) {
				out.Items = append(out.Items, it)
			}
		}
	}
	for _, s := range kb.static {
		if sel.Evaluate(s.GetLabels()) {
			out.Items = append(out.Items, s.DeepCopyObject().(v3.Resource))
		}
	}
	out.Revision = joinRevision(revs)
	datastore.Sort(out.Items)
	return out, nil
}

// crd returns the dynamic client of a kind's CRD, in a namespace.
func (c *Client) crd(kb *kindBackend, ns string) dynamic.ResourceInterface {
	return c.dyn.Resource(crdGVR(kb.info)).Namespace(ns)
}

// legacyPolicyCRName is the CR name releases before Calico v3.30 gave a
// default-tier policy ("default.<name>"), tried when the CR of the policy's
// own name does not exist; the caller checks the CR found is the policy
// asked for (its v3 name).
func legacyPolicyCRName(k datastore.Key) (string, bool) {
	if !tieredPolicyKind(k.Kind) || strings.HasPrefix(k.Name, k8sNetworkPolicyNamePrefix) {
		return "", false
	}
	return v3.DefaultTierName + "." + k.Name, true
}

// stubOf is what is known of an object whose stored form cannot be
// decoded: its kind, key and revision.
func stubOf(info v3.KindInfo, k datastore.Key, rv string) v3.Resource {
	obj := info.New()
	obj.SetName(k.Name)
	obj.SetNamespace(k.Namespace)
	obj.SetResourceVersion(rv)
	return obj
}
