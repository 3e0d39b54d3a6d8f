package plugin

import (
	"context"
	"net"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/ipam"
)

// Pods is the plugin's access to Kubernetes Pods in Kubernetes datastore
// mode (implemented by cni-plugin/kubepods, linked only into the binary
// that serves that mode).
type Pods interface {
	// Request reads the pod's IPAM inputs: its annotations merged with
	// its namespace's pool annotations, and the namespace's labels (its
	// Endpoint is not set).
	Request(ctx context.Context, namespace, pod string) (PodInfo, error)
	// Annotate records the pod's addresses and container on the pod.
	Annotate(ctx context.Context, namespace, pod, containerID string, addrs []net.IPNet) error
	// Owner returns the container that last annotated the pod.
	Owner(ctx context.Context, namespace, pod string) (string, error)
	// Release blanks the address annotations if containerID owns them.
	Release(ctx context.Context, namespace, pod, containerID string) error
}

// PodReader reads a pod from the Kubernetes API when the datastore is
// etcd: Calico's plugin, given a kubeconfig and policy type k8s, records
// the pod's labels, service account, profiles and named ports on the
// WorkloadEndpoint it writes to etcd, and honours the pod's IPAM
// annotations. Implemented by cni-plugin/kubepods, linked only into
// calico-k8s (the calico binary hands such calls to it).
type PodReader interface {
	Read(ctx context.Context, namespace, pod string) (PodInfo, error)
}

// PodInfo is what a pod and its namespace give its WorkloadEndpoint and
// its IPAM request.
type PodInfo struct {
	// Request holds the pod's IPAM annotations, with the namespace's
	// ipv4pools/ipv6pools where the pod sets none (Calico's precedence:
	// pod, then namespace, then the CNI config's ipv4_pools/ipv6_pools).
	Request ipam.PodRequest
	// NamespaceLabels are the labels of the pod's namespace, matched
	// against pools' namespaceSelectors (nil when not read).
	NamespaceLabels map[string]string
	// Endpoint carries the fields derived from the pod as Calico derives
	// them (labels with projectcalico.org/namespace, orchestrator and
	// serviceaccount; profiles kns.<ns> and ksa.<ns>.<sa>; the service
	// account; named and host ports; generateName; allowed source
	// prefixes). Its name, node, addresses and interface are not used.
	Endpoint *v3.WorkloadEndpoint
}

// readsPodFromKubernetes says whether an etcd-mode call reads the pod
// from Kubernetes, as Calico's plugin does: a Kubernetes pod, policy type
// k8s and a kubeconfig (or API root) to reach the API server with.
func readsPodFromKubernetes(conf *netconf.NetConf, orchestrator string) bool {
	return conf.DatastoreType != netconf.DatastoreKubernetes && orchestrator == "k8s" &&
		conf.Policy.PolicyType == "k8s" && (conf.Kubernetes.Kubeconfig != "" || conf.Kubernetes.K8sAPIRoot != "")
}
