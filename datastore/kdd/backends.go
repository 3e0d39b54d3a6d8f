package kdd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/pager"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// source is one Kubernetes resource that yields objects of a v3 kind: the
// kind's CRD, or a native resource Calico derives the kind from. The
// client lists, watches and gets through it; the informer syncer builds
// its informers from it.
type source struct {
	name       string // the resource, e.g. "pods" or "ippools.crd.projectcalico.org"
	kind       string // the v3 kind it yields
	gvr        schema.GroupVersionResource
	namespaced bool
	native     bool // a typed core resource (else a CRD, read as unstructured)
	// optional: the resource may not be served (a CRD that is not
	// installed); list and watch then see no objects, and the syncer
	// follows it through list and watch rather than a factory informer.
	optional bool
	// hides: objects of the resource may exist without a visible v3
	// object (pods without an IP), so a watch must know which were
	// visible at its start to tell an endpoint appearing from one changing.
	hides bool
	// convert turns an object of the resource (typed, or unstructured for
	// a CRD) into its v3 object. visible false means it has none now; obj
	// may still be set, naming the object a watcher saw go away.
	convert func(runtime.Object) (obj v3.Resource, visible bool, err error)
	list    func(ctx context.Context, ns string, opts metav1.ListOptions) (runtime.Object, error)
	watch   func(ctx context.Context, ns string, opts metav1.ListOptions) (watch.Interface, error)
	get     func(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error)
}

// kindBackend is how one v3 kind is stored: its sources, objects that are
// built in, and where the object of a given name lives.
type kindBackend struct {
	info    v3.KindInfo
	sources []*source
	static  []v3.Resource
	locate  func(datastore.Key) (location, error)
	// updateNative, when set, handles Update (Node: write-back into the
	// Kubernetes Node's annotations).
	updateNative func(context.Context, v3.Resource) (v3.Resource, error)
}

// location is where one object lives. With neither src nor static set,
// no object of that name can exist.
type location struct {
	src      *source
	ns, name string      // of the Kubernetes object
	static   v3.Resource // a built-in object, not stored
	readOnly string      // why writes are refused; "" when writable
}

// backends builds the backend of every kind: CRD-backed, except the kinds
// Calico derives (also) from native resources.
func (c *Client) backends() map[string]*kindBackend {
	out := map[string]*kindBackend{}
	for _, info := range v3.Kinds() {
		if DerivedKind(info.Kind) {
			out[info.Kind] = &kindBackend{info: info}
			continue
		}
		crd := c.crdSource(info)
		kb := &kindBackend{info: info, sources: []*source{crd}}
		kb.locate = func(k datastore.Key) (location, error) {
			return location{src: crd, ns: k.Namespace, name: k.Name}, nil
		}
		out[info.Kind] = kb
	}
	c.workloadEndpoints(out[v3.KindWorkloadEndpoint])
	c.profiles(out[v3.KindProfile])
	c.networkPolicies(out[v3.KindNetworkPolicy])
	c.globalNetworkPolicies(out[v3.KindGlobalNetworkPolicy])
	c.nodes(out[v3.KindNode])
	out[v3.KindKubernetesEndpointSlice] = c.endpointSlices()
	return out
}

func (c *Client) crdSource(info v3.KindInfo) *source {
	gvr := crdGVR(info)
	ri := func(ns string) dynamic.ResourceInterface { return c.dyn.Resource(gvr).Namespace(ns) }
	return &source{
		name:       gvr.Resource + "." + gvr.Group,
		kind:       info.Kind,
		gvr:        gvr,
		namespaced: info.Namespaced,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				return nil, false, fmt.Errorf("%s: unexpected object %T", gvr.Resource, o)
			}
			r, err := fromCR(info, u)
			return r, err == nil, err
		},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return ri(ns).List(ctx, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return ri(ns).Watch(ctx, o)
		},
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
			return ri(ns).Get(ctx, name, o)
		},
	}
}

// workloadEndpoints: Calico's Kubernetes datastore shows one
// WorkloadEndpoint per networked pod and stores none of its own.
func (c *Client) workloadEndpoints(kb *kindBackend) {
	pods := &source{
		name: "pods", kind: v3.KindWorkloadEndpoint, gvr: corev1.SchemeGroupVersion.WithResource("pods"), namespaced: true, native: true, hides: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			pod, ok := o.(*corev1.Pod)
			if !ok {
				return nil, false, fmt.Errorf("pods: unexpected object %T", o)
			}
			wep, visible, err := PodToWorkloadEndpoint(pod)
			if wep == nil {
				return nil, false, err
			}
			return wep, visible, err
		},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return c.native.pods().list(ctx, ns, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return c.native.pods().watch(ctx, ns, o)
		},
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
			return c.native.pods().get(ctx, ns, name, o)
		},
	}
	kb.sources = []*source{pods}
	kb.locate = func(k datastore.Key) (location, error) {
		_, pod, _, ok := ParseWorkloadEndpointName(k.Name)
		if !ok {
			// No pod has such an endpoint.
			return location{readOnly: fmt.Sprintf("WorkloadEndpoints come from pods, and %q is not a pod's endpoint name (<node>-k8s-<pod>-eth0): create the pod instead", k.Name)}, nil
		}
		return location{src: pods, ns: k.Namespace, name: pod,
			readOnly: fmt.Sprintf("WorkloadEndpoint %s is derived from Pod %s/%s: change the pod (its labels, service account or cni.projectcalico.org/podIP(s) annotations) instead", k.Name, k.Namespace, pod)}, nil
	}
}

// profiles: "kns.<ns>" from namespaces, "ksa.<ns>.<sa>" from service
// accounts and the built-in projectcalico-default-allow, all read-only:
// like Calico's, this datastore has no Profile resources of its own (and
// Calico's CRD set has no profiles CRD).
func (c *Client) profiles(kb *kindBackend) {
	namespaces := &source{
		name: "namespaces", kind: v3.KindProfile, gvr: corev1.SchemeGroupVersion.WithResource("namespaces"), native: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			ns, ok := o.(*corev1.Namespace)
			if !ok {
				return nil, false, fmt.Errorf("namespaces: unexpected object %T", o)
			}
			p, err := NamespaceToProfile(ns)
			return p, err == nil, err
		},
		list: func(ctx context.Context, _ string, o metav1.ListOptions) (runtime.Object, error) {
			return c.native.namespaces().list(ctx, "", o)
		},
		watch: func(ctx context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
			return c.native.namespaces().watch(ctx, "", o)
		},
		get: func(ctx context.Context, _, name string, o metav1.GetOptions) (runtime.Object, error) {
			return c.native.namespaces().get(ctx, "", name, o)
		},
	}
	serviceAccounts := &source{
		name: "serviceaccounts", kind: v3.KindProfile, gvr: corev1.SchemeGroupVersion.WithResource("serviceaccounts"), namespaced: true, native: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			sa, ok := o.(*corev1.ServiceAccount)
			if !ok {
				return nil, false, fmt.Errorf("serviceaccounts: unexpected object %T", o)
			}
			p, err := ServiceAccountToProfile(sa)
			return p, err == nil, err
		},
		list: func(ctx context.Context, _ string, o metav1.ListOptions) (runtime.Object, error) {
			return c.native.serviceAccounts().list(ctx, "", o)
		},
		watch: func(ctx context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
			return c.native.serviceAccounts().watch(ctx, "", o)
		},
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
			return c.native.serviceAccounts().get(ctx, ns, name, o)
		},
	}
	kb.sources = []*source{namespaces, serviceAccounts}
	kb.static = []v3.Resource{DefaultAllowProfile()}
	kb.locate = func(k datastore.Key) (location, error) {
		if k.Name == defaultAllowProfileName {
			return location{static: DefaultAllowProfile(), readOnly: "profile " + defaultAllowProfileName + " is built in"}, nil
		}
		if ns, ok := profileNameToNamespace(k.Name); ok {
			return location{src: namespaces, name: ns,
				readOnly: fmt.Sprintf("profile %s is derived from Namespace %s: change the namespace's labels instead", k.Name, ns)}, nil
		}
		if ns, sa, ok := profileNameToServiceAccount(k.Name); ok {
			return location{src: serviceAccounts, ns: ns, name: sa,
				readOnly: fmt.Sprintf("profile %s is derived from ServiceAccount %s/%s: change the service account's labels instead", k.Name, ns, sa)}, nil
		}
		return location{readOnly: fmt.Sprintf("the Kubernetes datastore has no Profile %q and stores none: profiles come from namespaces (%s<namespace>) and service accounts (%s<namespace>.<name>); label those instead, or use a NetworkPolicy", k.Name, namespaceProfilePrefix, serviceAccountProfilePrefix)}, nil
	}
}

// networkPolicies: Calico NetworkPolicies stored as CRDs, plus one
// "knp.default.<name>" per Kubernetes NetworkPolicy.
func (c *Client) networkPolicies(kb *kindBackend) {
	crd := hideNames(kb.sources[0], func(name string) bool { return strings.HasPrefix(name, k8sNetworkPolicyNamePrefix) })
	knp := &source{
		name: "networkpolicies.networking.k8s.io", kind: v3.KindNetworkPolicy, gvr: networkingv1.SchemeGroupVersion.WithResource("networkpolicies"), namespaced: true, native: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			np, ok := o.(*networkingv1.NetworkPolicy)
			if !ok {
				return nil, false, fmt.Errorf("networkpolicies: unexpected object %T", o)
			}
			p, err := K8sNetworkPolicyToCalico(np)
			if p == nil {
				return nil, false, err
			}
			if err != nil {
				// Rules were dropped; the rest of the policy still applies.
				slog.Warn("kubernetes network policy only partly converted", "err", err)
			}
			return p, true, nil
		},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return c.native.networkPolicies().list(ctx, ns, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return c.native.networkPolicies().watch(ctx, ns, o)
		},
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
			return c.native.networkPolicies().get(ctx, ns, name, o)
		},
	}
	kb.sources = []*source{crd, knp}
	kb.locate = func(k datastore.Key) (location, error) {
		if name, ok := strings.CutPrefix(k.Name, k8sNetworkPolicyNamePrefix); ok {
			return location{src: knp, ns: k.Namespace, name: name,
				readOnly: fmt.Sprintf("NetworkPolicy %s is derived from the Kubernetes NetworkPolicy %s/%s: edit that (networking.k8s.io/v1) instead", k.Name, k.Namespace, name)}, nil
		}
		return location{src: crd, ns: k.Namespace, name: k.Name}, nil
	}
}

// nodes: a Calico Node is the Kubernetes Node of the same name, its
// Calico fields kept in annotations. Kubernetes owns the node's life:
// Update writes the annotations back, Create and Delete are refused.
func (c *Client) nodes(kb *kindBackend) {
	nodes := &source{
		name: "nodes", kind: v3.KindNode, gvr: corev1.SchemeGroupVersion.WithResource("nodes"), native: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			kn, ok := o.(*corev1.Node)
			if !ok {
				return nil, false, fmt.Errorf("nodes: unexpected object %T", o)
			}
			n, err := K8sNodeToCalico(kn)
			return n, err == nil, err
		},
		list: func(ctx context.Context, _ string, o metav1.ListOptions) (runtime.Object, error) {
			return c.native.nodes().list(ctx, "", o)
		},
		watch: func(ctx context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
			return c.native.nodes().watch(ctx, "", o)
		},
		get: func(ctx context.Context, _, name string, o metav1.GetOptions) (runtime.Object, error) {
			return c.native.nodes().get(ctx, "", name, o)
		},
	}
	kb.sources = []*source{nodes}
	kb.locate = func(k datastore.Key) (location, error) {
		return location{src: nodes, name: k.Name,
			readOnly: fmt.Sprintf("Kubernetes owns the life of node %s: create or delete the Kubernetes Node; its Calico fields can be changed with an update", k.Name)}, nil
	}
	kb.updateNative = func(ctx context.Context, r v3.Resource) (v3.Resource, error) {
		n := r.(*v3.Node)
		raw, err := c.native.nodes().get(ctx, "", n.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		kn := raw.(*corev1.Node)
		if kn.ResourceVersion != n.ResourceVersion {
			return nil, datastore.ErrConflict
		}
		merged, err := MergeCalicoNodeIntoK8sNode(n, kn)
		if err != nil {
			return nil, err
		}
		// The status endpoint takes metadata changes too, and is what
		// Calico's RBAC (nodes/status) allows a node agent to write. The
		// resource version makes it a compare-and-swap.
		got, err := c.native.updateNodeStatus(ctx, merged)
		if err != nil {
			return nil, err
		}
		return K8sNodeToCalico(got)
	}
}

// hideNames returns a copy of a CRD source that hides objects whose names
// belong to a derived source (made behind Tabby's back, e.g. with
// kubectl), so that a name always means one object.
func hideNames(src *source, reserved func(string) bool) *source {
	cp := *src
	cp.convert = func(o runtime.Object) (v3.Resource, bool, error) {
		obj, visible, err := src.convert(o)
		if err == nil && visible && reserved(obj.GetName()) {
			slog.Debug("ignoring custom resource with a name reserved for derived objects", "resource", src.name, "name", obj.GetName())
			return obj, false, nil
		}
		return obj, visible, err
	}
	return &cp
}

// listSource lists one source in a namespace ("" all), paginated, and
// returns its visible objects, the objects that cannot be converted, and
// the list's resource version. cached lets the API server answer from its
// watch cache as it is (datastore.ListOptions.Cached).
func (c *Client) listSource(ctx context.Context, src *source, ns, labelSelector string, cached bool) ([]v3.Resource, []datastore.BadRecord, string, error) {
	if !src.namespaced {
		ns = ""
	}
	p := pager.New(pager.SimplePageFunc(func(o metav1.ListOptions) (runtime.Object, error) {
		return src.list(ctx, ns, o)
	}))
	list, _, err := p.List(ctx, metav1.ListOptions{LabelSelector: labelSelector, ResourceVersion: cachedRV(cached)})
	if err != nil {
		return nil, nil, "", c.storeErr(err)
	}
	acc, err := meta.ListAccessor(list)
	if err != nil {
		return nil, nil, "", err
	}
	var out []v3.Resource
	var bad []datastore.BadRecord
	err = meta.EachListItem(list, func(o runtime.Object) error {
		obj, visible, err := src.convert(o)
		if err != nil {
			// One bad object must not hide all others (Calico skips
			// too); the caller reports it.
			bad = append(bad, src.badRecord(o, err))
			return nil
		}
		if visible && (ns == "" || obj.GetNamespace() == ns) {
			out = append(out, obj)
		}
		return nil
	})
	return out, bad, acc.GetResourceVersion(), err
}

// badRecord describes an object of the source that cannot be converted.
// Its key is exact for custom resources; for a native object it names the
// object itself (its namespace and name).
func (src *source) badRecord(o runtime.Object, err error) datastore.BadRecord {
	b := datastore.BadRecord{Key: datastore.Key{Kind: src.kind}, StorageKey: src.name, Err: err}
	acc, aerr := meta.Accessor(o)
	if aerr != nil {
		return b
	}
	if src.namespaced {
		b.Key.Namespace = acc.GetNamespace()
	}
	b.Key.Name = acc.GetName()
	b.StorageKey = src.name + "/" + objectPath(acc.GetNamespace(), acc.GetName())
	b.Revision = acc.GetResourceVersion()
	return b
}

// objectPath is a Kubernetes object's namespace/name, or name when it is
// cluster-scoped.
func objectPath(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}

// currentRevision is the resource version of a source right now: where a
// watch "from now" starts.
func (c *Client) currentRevision(ctx context.Context, src *source, ns string) (string, error) {
	if !src.namespaced {
		ns = ""
	}
	list, err := src.list(ctx, ns, metav1.ListOptions{Limit: 1})
	if err != nil {
		return "", c.storeErr(err)
	}
	acc, err := meta.ListAccessor(list)
	if err != nil {
		return "", err
	}
	return acc.GetResourceVersion(), nil
}

// A kind with several sources has a revision made of theirs, joined by
// "/" in source order (Calico joins a profile's namespace and service
// account revisions the same way).
func joinRevision(revs []string) string { return strings.Join(revs, "/") }

func splitRevision(rev string, n int) ([]string, error) {
	parts := strings.Split(rev, "/")
	if len(parts) != n {
		return nil, fmt.Errorf("%w: revision %q was not made by this datastore (want %d part(s))", datastore.ErrInvalid, rev, n)
	}
	return parts, nil
}
