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

func (s store) pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	out := &corev1.Pod{}
	return out, s.core.Get().Namespace(namespace).Resource("pods").Name(name).Do(ctx).Into(out)
}

func (s store) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	out := &corev1.Namespace{}
	return out, s.core.Get().Resource("namespaces").Name(name).Do(ctx).Into(out)
}

// patchStatus merge-patches a pod through its status subresource.
func (s store) patchStatus(ctx context.Context, namespace, name string, body []byte) error {
	return s.core.Patch(k8stypes.MergePatchType).Namespace(namespace).Resource("pods").Name(name).
		SubResource("status").Body(body).Do(ctx).Error()
}
