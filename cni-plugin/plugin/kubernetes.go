package plugin

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

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// The pod annotations Calico's plugin writes in Kubernetes mode; the
// Kubernetes datastore derives the WorkloadEndpoint from them.
const (
	annotationPodIP       = "cni.projectcalico.org/podIP"
	annotationPodIPs      = "cni.projectcalico.org/podIPs"
	annotationContainerID = "cni.projectcalico.org/containerID"
)

// kubeClient is implemented by the Kubernetes datastore's client.
type kubeClient interface {
	Kubernetes() kubernetes.Interface
}

// kubeOf returns the clientset when the datastore is the Kubernetes API.
func kubeOf(c datastore.Client) (kubernetes.Interface, bool) {
	k, ok := c.(kubeClient)
	if !ok {
		return nil, false
	}
	return k.Kubernetes(), true
}

// podRequest reads the pod's IPAM annotations (ipv4pools, ipv6pools,
// ipAddrs) when the pod can be read; in etcd mode without Kubernetes
// access there are none.
func podRequest(ctx context.Context, client datastore.Client, c *call) (ipam.PodRequest, error) {
	kube, ok := kubeOf(client)
	if !ok || c.id.orchestrator != "k8s" {
		return ipam.PodRequest{}, nil
	}
	pod, err := kube.CoreV1().Pods(c.id.namespace).Get(ctx, c.id.pod, metav1.GetOptions{})
	if err != nil {
		return ipam.PodRequest{}, fmt.Errorf("reading pod %s/%s: %w", c.id.namespace, c.id.pod, kubeErr(err))
	}
	req, err := ipam.ParsePodAnnotations(pod.Annotations)
	if err != nil {
		return ipam.PodRequest{}, fmt.Errorf("pod %s/%s annotations: %w", c.id.namespace, c.id.pod, err)
	}
	return req, nil
}

// annotatePod records the pod's addresses on the pod, as Calico does.
func annotatePod(ctx context.Context, kube kubernetes.Interface, c *call, containerID string, addrs []net.IPNet) error {
	ips := make([]string, len(addrs))
	for i, a := range addrs {
		ips[i] = a.String()
	}
	return patchPodAnnotations(ctx, kube, c, map[string]any{
		annotationPodIP:       ips[0],
		annotationPodIPs:      strings.Join(ips, ","),
		annotationContainerID: containerID,
	})
}

// releasePodAnnotations blanks the address annotations if they still
// belong to containerID (a late DEL must not blank a newer sandbox's).
func releasePodAnnotations(ctx context.Context, kube kubernetes.Interface, c *call, containerID string) error {
	pod, err := kube.CoreV1().Pods(c.id.namespace).Get(ctx, c.id.pod, metav1.GetOptions{})
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
	return patchPodAnnotations(ctx, kube, c, map[string]any{annotationPodIP: "", annotationPodIPs: ""})
}

func patchPodAnnotations(ctx context.Context, kube kubernetes.Interface, c *call, ann map[string]any) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	_, err := kube.CoreV1().Pods(c.id.namespace).Patch(ctx, c.id.pod, k8stypes.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return fmt.Errorf("annotating pod %s/%s: %w", c.id.namespace, c.id.pod, kubeErr(err))
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

// podOwner returns the container that last annotated the pod ("" when
// none, or when the pod is gone).
func podOwner(ctx context.Context, kube kubernetes.Interface, c *call) (string, error) {
	pod, err := kube.CoreV1().Pods(c.id.namespace).Get(ctx, c.id.pod, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", kubeErr(err)
	}
	return pod.Annotations[annotationContainerID], nil
}
