package kubepods

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/cni-plugin/plugin"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/ipam"
)

// ReaderFor returns a pod reader for an etcd-mode call whose network
// config reaches Kubernetes (kubernetes.kubeconfig, with
// kubernetes.k8s_api_root overriding the server, as Calico's plugin reads
// them). Install it as plugin.Plugin.PodReaderFor.
func ReaderFor(conf *netconf.NetConf) (plugin.PodReader, error) {
	core, err := clientFor(conf)
	if err != nil {
		return nil, err
	}
	return &reader{store{core}}, nil
}

// clientFor is a core API group client for the network config's
// kubernetes section.
func clientFor(conf *netconf.NetConf) (rest.Interface, error) {
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: conf.Kubernetes.Kubeconfig},
		&clientcmd.ConfigOverrides{ClusterInfo: clientcmdapi.Cluster{Server: conf.Kubernetes.K8sAPIRoot}},
	).ClientConfig()
	if err != nil {
		return nil, &netconf.Error{Code: types.ErrInvalidNetworkConfig, Field: "kubernetes.kubeconfig", Msg: fmt.Sprintf("reaching Kubernetes to read the pod: %v", err)}
	}
	rc.UserAgent = "tabby-cni"
	// A pod ADD should fail fast when the API server is down: the
	// runtime retries.
	rc.Timeout = 3 * time.Second
	rc.Dial = (&net.Dialer{Timeout: 3 * time.Second}).DialContext
	// The pod and its namespace are read together: one connection.
	if rc, err = kdd.OneConnection(rc, ""); err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	core, err := kdd.NewCore(rc)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return core, nil
}

// NamespaceLabels reads the labels of a pod's namespace for pools'
// namespaceSelectors, as Calico's calico-ipam does when its config
// reaches Kubernetes (the Kubernetes datastore, a kubeconfig, or policy
// type k8s): through the datastore's clientset, else the config's
// kubeconfig. It returns nil, nil when the config does not reach
// Kubernetes (the labels are then unknown, and matched as none).
func NamespaceLabels(ctx context.Context, conf *netconf.NetConf, c datastore.Client, namespace string) (map[string]string, error) {
	if namespace == "" {
		return nil, nil
	}
	var core rest.Interface
	if k, ok := c.(coreClient); ok {
		core = k.Core()
	} else if conf.Kubernetes.Kubeconfig != "" || conf.Policy.PolicyType == "k8s" {
		var err error
		if core, err = clientFor(conf); err != nil {
			return nil, err
		}
	} else {
		return nil, nil
	}
	ns, err := store{core}.namespace(ctx, namespace)
	if err != nil {
		return nil, fmt.Errorf("failed to get namespace %s: %w", namespace, kubeErr(err))
	}
	if ns.Labels == nil {
		return map[string]string{}, nil
	}
	return ns.Labels, nil
}

type reader struct{ store store }

// Read gets the pod and its namespace (in parallel): the IPAM inputs
// (ipamInputs: the pod's annotations, the namespace's pools where the pod
// has none, the namespace's labels), and the endpoint fields the
// Kubernetes datastore derives from a pod (kdd.PodToWorkloadEndpoint, so
// labels, profiles, service account and ports are the same in both
// modes).
func (r *reader) Read(ctx context.Context, namespace, name string) (plugin.PodInfo, error) {
	pod, ns, err := getPodAndNamespace(ctx, r.store, namespace, name)
	if err != nil {
		return plugin.PodInfo{}, err
	}
	info, err := ipamInputs(ns, pod)
	if err != nil {
		return plugin.PodInfo{}, err
	}
	if info.Endpoint, err = endpointFields(pod); err != nil {
		return plugin.PodInfo{}, fmt.Errorf("pod %s/%s: %w", namespace, name, err)
	}
	return info, nil
}

// ipamAnnotations merges the IPAM annotations as Calico's plugin does: the
// namespace's pool lists apply unless the pod sets its own (non-empty);
// addresses (ipAddrs) come from the pod only.
func ipamAnnotations(nsAnn, podAnn map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{ipam.AnnotationIPv4Pools, ipam.AnnotationIPv6Pools} {
		if v := nsAnn[k]; v != "" {
			out[k] = v
		}
		if v := podAnn[k]; v != "" {
			out[k] = v
		}
	}
	if v, ok := podAnn[ipam.AnnotationIPAddrs]; ok {
		out[ipam.AnnotationIPAddrs] = v
	}
	return out
}

// endpointFields derives the pod's endpoint with the Kubernetes
// datastore's conversion, from a copy without what describes an earlier
// sandbox (its addresses): the plugin fills in addresses, node and
// interface itself.
func endpointFields(pod *corev1.Pod) (*v3.WorkloadEndpoint, error) {
	p := pod.DeepCopy()
	p.Status = corev1.PodStatus{}
	for _, k := range []string{annotationPodIP, annotationPodIPs, "vpc.amazonaws.com/pod-ips", annotationContainerID} {
		delete(p.Annotations, k)
	}
	p.DeletionTimestamp = nil
	if p.Spec.NodeName == "" {
		p.Spec.NodeName = "unscheduled" // the conversion names the endpoint by node; the name is not used
	}
	if p.Spec.HostNetwork {
		return nil, fmt.Errorf("the pod is host-networked: it has no Calico interface")
	}
	wep, _, err := kdd.PodToWorkloadEndpoint(p)
	if err != nil {
		return nil, err
	}
	if wep == nil {
		return nil, fmt.Errorf("no endpoint can be derived from the pod")
	}
	return wep, nil
}
