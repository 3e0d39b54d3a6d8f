package kubepods

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
)

// store is the plugin's pod and namespace access: a REST client of the
// core API group (datastore/kdd's Core or NewCore), not client-go's
// typed clientset, whose start-up the plugin would pay on every call.
type store struct{ core rest.Interface }

// pod reads a pod; cached lets the API server answer from its watch
// cache as it is (resourceVersion 0: no read from etcd, possibly a
// little behind).
func (s store) pod(ctx context.Context, namespace, name string, cached bool) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	req := s.core.Get().Namespace(namespace).Resource("pods").Name(name)
	if cached {
		req = req.Param("resourceVersion", "0")
	}
	return out, req.Do(ctx).Into(out)
}

// namespace reads a namespace from the API server's watch cache (its
// labels and pool annotations are IPAM inputs, read as the pools are:
// see ipam.Config.CachedReads).
func (s store) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	out := &corev1.Namespace{}
	return out, s.core.Get().Resource("namespaces").Name(name).Param("resourceVersion", "0").Do(ctx).Into(out)
}

// patchStatus merge-patches a pod through its status subresource.
func (s store) patchStatus(ctx context.Context, namespace, name string, body []byte) error {
	return s.core.Patch(k8stypes.MergePatchType).Namespace(namespace).Resource("pods").Name(name).
		SubResource("status").Body(body).Do(ctx).Error()
}
