package kdd

import (
	"context"
	"fmt"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
)

// The native resources the client reads (pods, namespaces, service
// accounts, nodes, Kubernetes NetworkPolicies, EndpointSlices) go through
// REST clients of their three API groups on a scheme of those groups
// only, not through client-go's typed clientset: the clientset's package
// registers every API group's types at start-up (~6 ms of CPU and ~20 MB
// of binary), which the CNI plugin, one process per pod, paid on every
// ADD. Components that want the clientset build it over the same
// connection and rate limit (datastore/kdd/clientset).

// nativeScheme knows the native types the client reads, with the
// options types every group's requests carry.
func nativeScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{corev1.AddToScheme, networkingv1.AddToScheme, discoveryv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kdd: native scheme: %v", err))
		}
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return s
}

// natives holds a REST client per native API group, sharing one HTTP
// client and one rate limiter.
type natives struct {
	core, networking, discovery rest.Interface
	params                      runtime.ParameterCodec
	config                      *rest.Config // of the core group, protobuf; RateLimiter set when limited
	http                        *http.Client
}

// newNatives builds the native REST clients over httpClient. rc's QPS
// and Burst become one rate limiter for all of them, as client-go's
// clientset shares one among its groups.
func newNatives(rc *rest.Config, httpClient *http.Client) (*natives, error) {
	scheme := nativeScheme()
	codecs := serializer.NewCodecFactory(scheme)
	base := rest.CopyConfig(rc)
	base.ContentType = "application/vnd.kubernetes.protobuf"
	base.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	base.NegotiatedSerializer = codecs.WithoutConversion()
	if base.RateLimiter == nil && base.QPS > 0 {
		base.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(base.QPS, base.Burst)
	}
	n := &natives{params: runtime.NewParameterCodec(scheme), http: httpClient}
	for _, g := range []struct {
		gv     schema.GroupVersion
		path   string
		client *rest.Interface
	}{
		{corev1.SchemeGroupVersion, "/api", &n.core},
		{networkingv1.SchemeGroupVersion, "/apis", &n.networking},
		{discoveryv1.SchemeGroupVersion, "/apis", &n.discovery},
	} {
		cfg := rest.CopyConfig(base)
		cfg.GroupVersion, cfg.APIPath = &g.gv, g.path
		rc, err := rest.RESTClientForConfigAndClient(cfg, httpClient)
		if err != nil {
			return nil, err
		}
		*g.client = rc
		if g.gv == corev1.SchemeGroupVersion {
			n.config = cfg
		}
	}
	return n, nil
}

// nativeResource is one native resource's reads: list, watch and get,
// as its typed client makes them.
type nativeResource struct {
	client   rest.Interface
	params   runtime.ParameterCodec
	resource string
	newObj   func() runtime.Object
	newList  func() runtime.Object
}

func (n *natives) resource(client rest.Interface, resource string, newObj, newList func() runtime.Object) nativeResource {
	return nativeResource{client: client, params: n.params, resource: resource, newObj: newObj, newList: newList}
}

func (r nativeResource) list(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
	req := r.client.Get().NamespaceIfScoped(ns, ns != "").Resource(r.resource).VersionedParams(&o, r.params)
	if o.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*o.TimeoutSeconds) * time.Second)
	}
	out := r.newList()
	return out, req.Do(ctx).Into(out)
}

func (r nativeResource) watch(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
	o.Watch = true
	req := r.client.Get().NamespaceIfScoped(ns, ns != "").Resource(r.resource).VersionedParams(&o, r.params)
	if o.TimeoutSeconds != nil {
		req = req.Timeout(time.Duration(*o.TimeoutSeconds) * time.Second)
	}
	return req.Watch(ctx)
}

func (r nativeResource) get(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
	out := r.newObj()
	err := r.client.Get().NamespaceIfScoped(ns, ns != "").Resource(r.resource).Name(name).
		VersionedParams(&o, r.params).Do(ctx).Into(out)
	return out, err
}

func (n *natives) pods() nativeResource {
	return n.resource(n.core, "pods", func() runtime.Object { return &corev1.Pod{} }, func() runtime.Object { return &corev1.PodList{} })
}

func (n *natives) namespaces() nativeResource {
	return n.resource(n.core, "namespaces", func() runtime.Object { return &corev1.Namespace{} }, func() runtime.Object { return &corev1.NamespaceList{} })
}

func (n *natives) serviceAccounts() nativeResource {
	return n.resource(n.core, "serviceaccounts", func() runtime.Object { return &corev1.ServiceAccount{} }, func() runtime.Object { return &corev1.ServiceAccountList{} })
}

func (n *natives) nodes() nativeResource {
	return n.resource(n.core, "nodes", func() runtime.Object { return &corev1.Node{} }, func() runtime.Object { return &corev1.NodeList{} })
}

func (n *natives) networkPolicies() nativeResource {
	return n.resource(n.networking, "networkpolicies", func() runtime.Object { return &networkingv1.NetworkPolicy{} }, func() runtime.Object { return &networkingv1.NetworkPolicyList{} })
}

func (n *natives) endpointSlices() nativeResource {
	return n.resource(n.discovery, "endpointslices", func() runtime.Object { return &discoveryv1.EndpointSlice{} }, func() runtime.Object { return &discoveryv1.EndpointSliceList{} })
}

// updateNodeStatus writes a node through its status subresource.
func (n *natives) updateNodeStatus(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	out := &corev1.Node{}
	err := n.core.Put().Resource("nodes").Name(node.Name).SubResource("status").
		VersionedParams(&metav1.UpdateOptions{}, n.params).Body(node).Do(ctx).Into(out)
	return out, err
}

// Core returns the client's REST client of the core API group (v1), for
// callers that touch native objects directly (the CNI plugin reads and
// annotates pods, as Calico's does). It shares the client's connection
// and rate limit.
func (c *Client) Core() rest.Interface { return c.native.core }

// NativeConfig returns the configuration and HTTP client the client's
// native REST clients use (protobuf, the client's rate limiter), for
// building client-go's typed clientset over the same connection
// (datastore/kdd/clientset).
func (c *Client) NativeConfig() (*rest.Config, *http.Client) {
	return rest.CopyConfig(c.native.config), c.native.http
}

// NewCore returns a REST client of the core API group (v1) on rc, as
// Client.Core's, for a process that reads only native objects (the CNI
// plugin in etcd mode reads the pod).
func NewCore(rc *rest.Config) (rest.Interface, error) {
	httpClient, err := rest.HTTPClientFor(rc)
	if err != nil {
		return nil, err
	}
	n, err := newNatives(rc, httpClient)
	if err != nil {
		return nil, err
	}
	return n.core, nil
}
