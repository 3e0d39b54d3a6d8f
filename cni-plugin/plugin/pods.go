package plugin

import (
	"context"
	"net"

	"github.com/tabbynet/tabby/ipam"
)

// Pods is the plugin's access to Kubernetes Pods in Kubernetes datastore
// mode (implemented by cni-plugin/kubepods, linked only into the binary
// that serves that mode).
type Pods interface {
	// Request reads the pod's IPAM annotations.
	Request(ctx context.Context, namespace, pod string) (ipam.PodRequest, error)
	// Annotate records the pod's addresses and container on the pod.
	Annotate(ctx context.Context, namespace, pod, containerID string, addrs []net.IPNet) error
	// Owner returns the container that last annotated the pod.
	Owner(ctx context.Context, namespace, pod string) (string, error)
	// Release blanks the address annotations if containerID owns them.
	Release(ctx context.Context, namespace, pod, containerID string) error
}
