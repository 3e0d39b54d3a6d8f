// Package kubepods is the calico plugin's access to Pods in Kubernetes
// datastore mode: it reads a pod's IPAM annotations and writes the
// annotations Calico's plugin writes (podIP, podIPs, containerID), from
// which the Kubernetes datastore derives the WorkloadEndpoint. It is kept
// out of package plugin so the etcd-mode binary does not link client-go's
// typed clientset, whose start-up alone costs milliseconds per pod.
package kubepods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// The pod annotations Calico's plugin writes in Kubernetes mode.
const (
	annotationPodIP       = "cni.projectcalico.org/podIP"
	annotationPodIPs      = "cni.projectcalico.org/podIPs"
	annotationContainerID = "cni.projectcalico.org/containerID"
)

// For returns the pod store of a Kubernetes-datastore client (it must
// expose its clientset, as datastore/kdd's does). Install it as
// plugin.Plugin.PodsFor.
func For(c datastore.Client) (plugin.Pods, bool) {
	k, ok := c.(interface{ Kubernetes() kubernetes.Interface })
	if !ok {
		return nil, false
	}
	return &pods{kube: k.Kubernetes()}, true
}

type pods struct{ kube kubernetes.Interface }

// Request reads the pod's IPAM annotations (ipv4pools, ipv6pools, ipAddrs).
func (p *pods) Request(ctx context.Context, namespace, name string) (ipam.PodRequest, error) {
	pod, err := p.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return ipam.PodRequest{}, fmt.Errorf("reading pod %s/%s: %w", namespace, name, kubeErr(err))
	}
	req, err := ipam.ParsePodAnnotations(pod.Annotations)
	if err != nil {
		return ipam.PodRequest{}, fmt.Errorf("pod %s/%s annotations: %w", namespace, name, err)
	}
	return req, nil
}

// Annotate records the pod's addresses on the pod, as Calico does.
func (p *pods) Annotate(ctx context.Context, namespace, name, containerID string, addrs []net.IPNet) error {
	ips := make([]string, len(addrs))
	for i, a := range addrs {
		ips[i] = a.String()
	}
	return p.patch(ctx, namespace, name, map[string]any{
		annotationPodIP:       ips[0],
		annotationPodIPs:      strings.Join(ips, ","),
		annotationContainerID: containerID,
	})
}

// Owner returns the container that last annotated the pod ("" when none,
// or when the pod is gone).
func (p *pods) Owner(ctx context.Context, namespace, name string) (string, error) {
	pod, err := p.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", kubeErr(err)
	}
	return pod.Annotations[annotationContainerID], nil
}

// Release blanks the address annotations if they still belong to
// containerID (a late DEL must not blank a newer sandbox's).
func (p *pods) Release(ctx context.Context, namespace, name, containerID string) error {
	pod, err := p.kube.CoreV1().Pods(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return kubeErr(err)
	}
	if owner, ok := pod.Annotations[annotationContainerID]; ok && owner != containerID {
		return nil
	}
	if pod.Annotations[annotationPodIP] == "" && pod.Annotations[annotationPodIPs] == "" {
		return nil
	}
	return p.patch(ctx, namespace, name, map[string]any{annotationPodIP: "", annotationPodIPs: ""})
}

// patch writes the plugin's annotations through the pod's status
// subresource, as Calico's plugin does: the API server keeps metadata
// changes made there, and RBAC then need only grant pods/status patch (the
// plugin cannot change a pod's spec).
func (p *pods) patch(ctx context.Context, namespace, name string, ann map[string]any) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	_, err := p.kube.CoreV1().Pods(namespace).Patch(ctx, name, k8stypes.MergePatchType, body, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("annotating pod %s/%s: %w", namespace, name, kubeErr(err))
	}
	return nil
}

// kubeErr marks transport failures as the datastore being unavailable, so
// the runtime is told to try again later (code 11).
func kubeErr(err error) error {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	return &datastore.UnavailableError{Err: err}
}
