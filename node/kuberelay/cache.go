package kuberelay

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/tabbynet/tabby/datastore/kdd"
)

// cachedKind is one resource the relay watches and may answer for.
type cachedKind struct {
	gvr        schema.GroupVersionResource
	kind       string // its Kind; lists are Kind+"List"
	namespaced bool
	// labels is the label selector the watch is restricted to ("" every
	// object): a list is answered only for this very selector.
	labels string
	// fields is the field selector the watch is restricted to: a list of
	// a kind so restricted is never answered (the plugin sends none).
	fields string
	// complete: the watch holds every object of the resource, so a Get
	// it misses is NotFound; otherwise such a Get is not held (421).
	complete bool
	inf      cache.SharedIndexInformer
}

// cachedKinds are the reads of a CNI ADD that may come from a cache (the
// plugin sends them with resourceVersion=0): the cluster's IP pools,
// reservations and IPAM settings, every namespace, and this node's own
// Node, pods and block affinities.
func cachedKinds(dyn dynamic.Interface, node string) []*cachedKind {
	crd := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: resource}
	}
	core := func(resource string) schema.GroupVersionResource {
		return schema.GroupVersionResource{Version: "v1", Resource: resource}
	}
	kinds := []*cachedKind{
		{gvr: crd("ippools"), kind: "IPPool", complete: true},
		{gvr: crd("ipreservations"), kind: "IPReservation", complete: true},
		{gvr: crd("ipamconfigs"), kind: "IPAMConfig", complete: true},
		{gvr: affinitiesGVR, kind: "BlockAffinity", labels: kdd.NodeAffinitySelector(node)},
		{gvr: core("namespaces"), kind: "Namespace", complete: true},
		{gvr: core("nodes"), kind: "Node"},
		{gvr: core("pods"), kind: "Pod", namespaced: true},
	}
	fields := map[string]string{"nodes": "metadata.name=" + node, "pods": "spec.nodeName=" + node}
	for _, k := range kinds {
		k.fields = fields[k.gvr.Resource]
		f, l := k.fields, k.labels
		k.inf = dynamicinformer.NewFilteredDynamicInformer(dyn, k.gvr, metav1.NamespaceAll, 0, cache.Indexers{},
			func(o *metav1.ListOptions) { o.FieldSelector, o.LabelSelector = f, l }).Informer()
	}
	return kinds
}

// request is a read the relay may answer: a Get (name set) or a List of
// a resource, in a namespace or all.
type request struct {
	gvr       schema.GroupVersionResource
	namespace string
	name      string
}

// parsePath reads /api/v1/... and /apis/crd.projectcalico.org/v1/...
// paths; ok is false for anything else (subresources included).
func parsePath(path string) (request, bool) {
	var r request
	var rest string
	switch {
	case strings.HasPrefix(path, "/api/v1/"):
		r.gvr.Version, rest = "v1", strings.TrimPrefix(path, "/api/v1/")
	case strings.HasPrefix(path, "/apis/crd.projectcalico.org/v1/"):
		r.gvr.Group, r.gvr.Version, rest = "crd.projectcalico.org", "v1", strings.TrimPrefix(path, "/apis/crd.projectcalico.org/v1/")
	default:
		return r, false
	}
	seg := strings.Split(rest, "/")
	if len(seg) >= 3 && seg[0] == "namespaces" {
		r.namespace, seg = seg[1], seg[2:]
	}
	switch len(seg) {
	case 1:
		r.gvr.Resource = seg[0]
	case 2:
		r.gvr.Resource, r.name = seg[0], seg[1]
	default:
		return r, false
	}
	return r, r.gvr.Resource != "" && !slices.Contains(seg, "")
}

// answer writes the cached answer to req and returns true, or returns
// false when req must go to the API server.
func (r *Relay) answer(w http.ResponseWriter, req *http.Request) bool {
	if req.Method != http.MethodGet {
		return false
	}
	q := req.URL.Query()
	if q.Get("resourceVersion") != "0" || q.Get("watch") != "" || q.Get("fieldSelector") != "" || q.Get("continue") != "" {
		return false
	}
	rq, ok := parsePath(req.URL.Path)
	if !ok {
		return false
	}
	if rq.gvr == blocksGVR && rq.name != "" && q.Get("labelSelector") == "" {
		o, ok := r.blocks.get(rq.name)
		if ok {
			writeJSON(w, http.StatusOK, o)
		}
		return ok
	}
	k := r.kind(rq.gvr)
	if k == nil || !k.inf.HasSynced() || rq.namespace != "" && !k.namespaced {
		return false
	}
	if rq.name != "" {
		return q.Get("labelSelector") == "" && k.get(w, rq)
	}
	if k.fields != "" || !sameSelector(q.Get("labelSelector"), k.labels) {
		return false
	}
	k.list(w, rq.namespace)
	return true
}

func (r *Relay) kind(gvr schema.GroupVersionResource) *cachedKind {
	for _, k := range r.kinds {
		if k.gvr == gvr {
			return k
		}
	}
	return nil
}

// sameSelector reports whether two label selectors select the same.
func sameSelector(a, b string) bool {
	if a == b {
		return true
	}
	sa, errA := labels.Parse(a)
	sb, errB := labels.Parse(b)
	return errA == nil && errB == nil && sa.String() == sb.String()
}

// get answers a Get from the cache: the object, or NotFound when the
// cache is complete; false (not held) when it is not.
func (k *cachedKind) get(w http.ResponseWriter, rq request) bool {
	key := rq.name
	if k.namespaced {
		key = rq.namespace + "/" + rq.name
	}
	o, exists, err := k.inf.GetStore().GetByKey(key)
	switch {
	case err != nil:
		return false
	case exists:
		writeJSON(w, http.StatusOK, o)
	case k.complete:
		writeStatus(w, apierrors.NewNotFound(k.gvr.GroupResource(), rq.name))
	default:
		return false
	}
	return true
}

// list answers a List from the cache, sorted as the API server's watch
// cache sorts it, at the version the cache has seen.
func (k *cachedKind) list(w http.ResponseWriter, namespace string) {
	var items []any
	for _, o := range k.inf.GetStore().List() {
		u, ok := o.(*unstructured.Unstructured)
		if ok && (namespace == "" || u.GetNamespace() == namespace) {
			items = append(items, u)
		}
	}
	slices.SortFunc(items, func(a, b any) int {
		ua, ub := a.(*unstructured.Unstructured), b.(*unstructured.Unstructured)
		return strings.Compare(ua.GetNamespace()+"/"+ua.GetName(), ub.GetNamespace()+"/"+ub.GetName())
	})
	if items == nil {
		items = []any{}
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"apiVersion": k.gvr.GroupVersion().String(),
		"kind":       k.kind + "List",
		"metadata":   map[string]any{"resourceVersion": k.inf.LastSyncResourceVersion()},
		"items":      items,
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// writeStatus writes err as the API server writes its errors.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	writeJSON(w, int(st.Code), st)
}
