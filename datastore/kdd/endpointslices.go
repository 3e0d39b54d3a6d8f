package kdd

import (
	"context"
	"fmt"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// endpointSlices is the read-only kind felix follows for rules' services
// matches (v3.KindKubernetesEndpointSlice): the cluster's EndpointSlices
// as they are, as Calico's felix reads them in Kubernetes mode. It is not
// a Calico kind (not among v3.Kinds): only the syncer and List name it.
func (c *Client) endpointSlices() *kindBackend {
	slices := &source{
		name: "endpointslices.discovery.k8s.io", kind: v3.KindKubernetesEndpointSlice,
		gvr: discoveryv1.SchemeGroupVersion.WithResource("endpointslices"), namespaced: true, native: true,
		convert: func(o runtime.Object) (v3.Resource, bool, error) {
			es, ok := o.(*discoveryv1.EndpointSlice)
			if !ok {
				return nil, false, fmt.Errorf("endpointslices: unexpected object %T", o)
			}
			return v3.NewKubernetesEndpointSlice(es), true, nil
		},
		list: func(ctx context.Context, ns string, o metav1.ListOptions) (runtime.Object, error) {
			return c.native.endpointSlices().list(ctx, ns, o)
		},
		watch: func(ctx context.Context, ns string, o metav1.ListOptions) (watch.Interface, error) {
			return c.native.endpointSlices().watch(ctx, ns, o)
		},
		get: func(ctx context.Context, ns, name string, o metav1.GetOptions) (runtime.Object, error) {
			return c.native.endpointSlices().get(ctx, ns, name, o)
		},
	}
	info := v3.KindInfo{Kind: v3.KindKubernetesEndpointSlice, Plural: "kubernetesendpointslices", Namespaced: true,
		New: func() v3.Resource { return v3.NewKubernetesEndpointSlice(&discoveryv1.EndpointSlice{}) }}
	return &kindBackend{info: info, sources: []*source{slices}, locate: func(k datastore.Key) (location, error) {
		return location{src: slices, ns: k.Namespace, name: k.Name,
			readOnly: "EndpointSlices are Kubernetes' (discovery.k8s.io/v1): felix only reads them"}, nil
	}}
}
