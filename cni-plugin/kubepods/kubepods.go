// Package kubepods is the calico plugin's access to Pods in Kubernetes
// datastore mode: it reads a pod's IPAM annotations with its namespace's
// pool annotations and labels (for pools' namespaceSelectors), and writes
// the annotations Calico's plugin writes (podIP, podIPs, containerID),
// from which the Kubernetes datastore derives the WorkloadEndpoint. In
// etcd mode it reads the pod for its endpoint (ReaderFor) and, for
// calico-ipam, the namespace's labels (NamespaceLabels). It is kept
// out of package plugin so the etcd-mode binary does not link client-go's
// REST clients, whose start-up alone costs milliseconds per pod.
package kubepods

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/rest"

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
// expose its core API group's REST client, as datastore/kdd's does).
// Install it as plugin.Plugin.PodsFor.
func For(c datastore.Client) (plugin.Pods, bool) {
	k, ok := c.(coreClient)
	if !ok {
		return nil, false
	}
	return &pods{store{k.Core()}}, true
}

// coreClient is a datastore client that exposes its core API group.
type coreClient interface{ Core() rest.Interface }

type pods struct{ store store }

// Request reads the pod and its namespace (in parallel, one round trip):
// the pod's IPAM annotations merged with the namespace's pool annotations
// and the namespace's labels (for pools' namespaceSelectors).
func (p *pods) Request(ctx context.Context, namespace, name string) (plugin.PodInfo, error) {
	pod, ns, err := getPodAndNamespace(ctx, p.store, namespace, name)
	if err != nil {
		return plugin.PodInfo{}, err
	}
	return ipamInputs(ns, pod)
}

// getPodAndNamespace reads a pod and its namespace in parallel.
func getPodAndNamespace(ctx context.Context, s store, namespace, name string) (*corev1.Pod, *corev1.Namespace, error) {
	var ns *corev1.Namespace
	var nsErr error
	nsDone := make(chan struct{})
	go func() {
		defer close(nsDone)
		ns, nsErr = s.namespace(ctx, namespace)
	}()
	// From the watch cache: the kubelet learnt of the pod from an API
	// server's watch, and what the ADD reads (the IPAM annotations) is
	// set when the pod is created. A cache that has not seen the pod yet
	// (another API server's, behind the kubelet's) is asked again with a
	// consistent read, so the ADD fails only if the pod is really gone.
	pod, err := s.pod(ctx, namespace, name, true)
	if apierrors.IsNotFound(err) {
		pod, err = s.pod(ctx, namespace, name, false)
	}
	<-nsDone
	if err != nil {
		return nil, nil, fmt.Errorf("reading pod %s/%s: %w", namespace, name, kubeErr(err))
	}
	if nsErr != nil {
		// Calico's plugin fails the ADD the same way: without the
		// namespace neither its pool annotations nor its labels (pools'
		// namespaceSelectors) can be honoured.
		return nil, nil, fmt.Errorf("failed to get namespace %s of pod %s: %w", namespace, name, kubeErr(nsErr))
	}
	return pod, ns, nil
}

// ipamInputs is what a pod and its namespace ask of IPAM, as Calico's
// plugin reads them: the pod's annotations with the namespace's
// ipv4pools/ipv6pools where the pod sets none, and the namespace's labels
// (never nil: a namespace without labels has none, which is not the same
// as labels unknown).
func ipamInputs(ns *corev1.Namespace, pod *corev1.Pod) (plugin.PodInfo, error) {
	req, err := ipam.ParsePodAnnotations(ipamAnnotations(ns.Annotations, pod.Annotations))
	if err != nil {
		return plugin.PodInfo{}, fmt.Errorf("pod %s/%s annotations: %w", pod.Namespace, pod.Name, err)
	}
	labels := ns.Labels
	if labels == nil {
		labels = map[string]string{}
	}
	return plugin.PodInfo{Request: req, NamespaceLabels: labels}, nil
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
	pod, err := p.store.pod(ctx, namespace, name, false)
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
	pod, err := p.store.pod(ctx, namespace, name, false)
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
	err = p.patch(ctx, namespace, name, map[string]any{annotationPodIP: "", annotationPodIPs: ""})
	if apierrors.IsNotFound(err) {
		// Deleted since it was read (a forced delete races the DEL):
		// nothing left to blank, and the DEL must go on to release the
		// addresses (Calico's DEL carries on past a missing endpoint).
		return nil
	}
	return err
}

// patch writes the plugin's annotations through the pod's status
// subresource, as Calico's plugin does: the API server keeps metadata
// changes made there, and RBAC then need only grant pods/status patch (the
// plugin cannot change a pod's spec).
func (p *pods) patch(ctx context.Context, namespace, name string, ann map[string]any) error {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err := p.store.patchStatus(ctx, namespace, name, body); err != nil {
		return fmt.Errorf("annotating pod %s/%s: %w", namespace, name, kubeErr(err))
	}
	return nil
}

// kubeErr marks transport failures as the datastore being unavailable, so
// the runtime is told to try again later (code 11), and a refusal of the
// plugin's credentials or permissions (RBAC) as access denied (105).
func kubeErr(err error) error {
	api := []string{"the Kubernetes API"}
	switch {
	case apierrors.IsForbidden(err):
		return &datastore.AccessError{Endpoints: api, Reason: "no permission: check the calico-cni-plugin ClusterRole", Err: err}
	case apierrors.IsUnauthorized(err):
		return &datastore.AccessError{Endpoints: api, Reason: "the plugin's credentials were refused: check its kubeconfig", Err: err}
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return err
	}
	return &datastore.UnavailableError{Endpoints: api, Err: err}
}
