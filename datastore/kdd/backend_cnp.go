package kdd

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// ClusterNetworkPolicyGVR is the Kubernetes ClusterNetworkPolicy resource
// (kubernetes-sigs/network-policy-api, a CRD of its own group).
var ClusterNetworkPolicyGVR = cnpv1.SchemeGroupVersion.WithResource("clusternetworkpolicies")

// absentResourceRetry is how long the watch of a resource whose CRD is
// not installed waits before looking again.
const absentResourceRetry = time.Minute

// globalNetworkPolicies: Calico GlobalNetworkPolicies stored as CRDs,
// plus one "kcnp.<name>" per Kubernetes ClusterNetworkPolicy (read-only),
// which is how felix reads them directly, as Calico's felix does in this
// datastore. A cluster without the ClusterNetworkPolicy CRD has none.
func (c *Client) globalNetworkPolicies(kb *kindBackend) {
	crd := hideNames(kb.sources[0], func(name string) bool { return strings.HasPrefix(name, ClusterNetworkPolicyNamePrefix) })
	ri := c.dyn.Resource(ClusterNetworkPolicyGVR)
	lw := cnpListWatch(c.dyn)
	cnp := &source{
		name: ClusterNetworkPolicyGVR.Resource + "." + ClusterNetworkPolicyGVR.Group, kind: v3.KindGlobalNetworkPolicy,
		gvr: ClusterNetworkPolicyGVR, optional: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			p, err := UnstructuredCNPToCalico(o)
			if p == nil {
				return nil, false, err
			}
			if err != nil {
				// Rules were replaced or dropped (fail closed); the rest
				// of the policy still applies.
				c.partial.Seen(datastore.KeyOf(p), p.ResourceVersion, UnconvertibleRules(err), err)
			} else {
				c.partial.Gone(datastore.KeyOf(p))
			}
			return p, true, nil
		},
		list: func(ctx context.Context, _ string, o metav1.ListOptions) (runtime.Object, error) {
			return lw.ListWithContext(ctx, o)
		},
		watch: func(ctx context.Context, _ string, o metav1.ListOptions) (watch.Interface, error) {
			return lw.WatchWithContext(ctx, o)
		},
		get: func(ctx context.Context, _, name string, o metav1.GetOptions) (runtime.Object, error) {
			return ri.Get(ctx, name, o)
		},
	}
	kb.sources = []*source{crd, cnp}
	kb.locate = func(k datastore.Key) (location, error) {
		if name, ok := strings.CutPrefix(k.Name, ClusterNetworkPolicyNamePrefix); ok {
			return location{src: cnp, name: name,
				readOnly: fmt.Sprintf("GlobalNetworkPolicy %s is derived from the Kubernetes ClusterNetworkPolicy %s: edit that (policy.networking.k8s.io/v1alpha2) instead", k.Name, name)}, nil
		}
		return location{src: crd, name: k.Name}, nil
	}
}

// cnpListWatch lists and watches ClusterNetworkPolicies (unstructured).
// While the CRD is not installed, the list is empty and the watch idles
// for absentResourceRetry, then ends so that the caller looks again.
func cnpListWatch(dyn dynamic.Interface) *cache.ListWatch {
	ri := dyn.Resource(ClusterNetworkPolicyGVR)
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			l, err := ri.List(ctx, o)
			if apierrors.IsNotFound(err) {
				return &unstructured.UnstructuredList{Object: map[string]any{}}, nil
			}
			return l, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, o)
			if apierrors.IsNotFound(err) {
				return idleWatch(ctx, absentResourceRetry), nil
			}
			return w, err
		},
	}
}

// NewClusterNetworkPolicyInformer is an informer of the cluster's
// ClusterNetworkPolicies (as unstructured objects; see
// UnstructuredCNPToCalico), which sees none while the CRD is not
// installed. kube-controllers mirrors them into etcd with it.
func NewClusterNetworkPolicyInformer(dyn dynamic.Interface) cache.SharedIndexInformer {
	return cache.NewSharedIndexInformer(cnpListWatch(dyn), &unstructured.Unstructured{}, 0, cache.Indexers{})
}

// UnstructuredCNPToCalico converts a ClusterNetworkPolicy read as
// unstructured (K8sClusterNetworkPolicyToCalico).
func UnstructuredCNPToCalico(o runtime.Object) (*v3.GlobalNetworkPolicy, error) {
	u, ok := o.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("clusternetworkpolicies: unexpected object %T", o)
	}
	var cnp cnpv1.ClusterNetworkPolicy
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cnp); err != nil {
		return nil, fmt.Errorf("clusternetworkpolicies: %w", err)
	}
	return K8sClusterNetworkPolicyToCalico(&cnp)
}

// idleWatch is the watch of a resource that is not served (its CRD is
// not installed): no events, and it ends after d so that the watcher
// looks again.
func idleWatch(ctx context.Context, d time.Duration) watch.Interface {
	ch := make(chan watch.Event)
	w := watch.NewProxyWatcher(ch)
	go func() {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
		case <-t.C:
		case <-w.StopChan():
		}
		w.Stop()
		close(ch)
	}()
	return w
}

// UnconvertibleRules is how many rules a conversion error names (a
// *CNPConversionError's rules; 1 for any other error).
func UnconvertibleRules(err error) int {
	var ce *CNPConversionError
	if errors.As(err, &ce) {
		return len(ce.Rules)
	}
	return 1
}
