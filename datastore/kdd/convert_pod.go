package kdd

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// podEndpoint is the one interface Calico gives a pod.
const podEndpoint = "eth0"

// PodToWorkloadEndpoint converts a pod to its WorkloadEndpoint, as Calico's
// Kubernetes datastore does. visible says whether the endpoint is shown
// at all: a pod that is host-networked, unscheduled, without an IP, or
// finished has none. wep is returned whenever the pod is scheduled and not
// host-networked, so a watcher can still name the endpoint that went away.
func PodToWorkloadEndpoint(pod *corev1.Pod) (wep *v3.WorkloadEndpoint, visible bool, err error) {
	if pod.Spec.HostNetwork || pod.Spec.NodeName == "" {
		return nil, false, nil
	}
	name, err := WorkloadEndpointName(pod.Spec.NodeName, pod.Name, podEndpoint)
	if err != nil {
		return nil, false, err
	}
	ipNets, err := podIPNets(pod)
	if err != nil {
		return nil, false, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if podFinished(pod) {
		// The IPs went back to the pool: the endpoint no longer owns them.
		ipNets = nil
	}

	profiles := []string{namespaceProfilePrefix + pod.Namespace}
	if sa := pod.Spec.ServiceAccountName; sa != "" {
		profiles = append(profiles, serviceAccountProfileName(pod.Namespace, sa))
	}

	labels := make(map[string]string, len(pod.Labels)+3)
	maps.Copy(labels, pod.Labels)
	labels[labelNamespace] = pod.Namespace
	labels[labelOrchestrator] = orchestratorK8s
	if sa := pod.Spec.ServiceAccountName; sa != "" && len(sa) < 63 {
		// A label value is at most 63 characters; longer names are left
		// out, as Calico does.
		labels[labelServiceAccount] = sa
	}

	nats, err := floatingIPs(pod.Annotations, ipNets)
	if err != nil {
		return nil, false, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	spoof, err := allowedSourcePrefixes(pod.Annotations)
	if err != nil {
		return nil, false, fmt.Errorf("pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}

	var ports []v3.WorkloadEndpointPort
	ports = appendEndpointPorts(ports, pod.Spec.Containers)
	ports = appendEndpointPorts(ports, pod.Spec.InitContainers)

	wep = &v3.WorkloadEndpoint{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         pod.Namespace,
			ResourceVersion:   pod.ResourceVersion,
			UID:               pod.UID,
			CreationTimestamp: pod.CreationTimestamp,
			GenerateName:      pod.GenerateName,
			Labels:            labels,
		},
		Spec: v3.WorkloadEndpointSpec{
			Orchestrator:               orchestratorK8s,
			Node:                       pod.Spec.NodeName,
			Pod:                        pod.Name,
			ContainerID:                pod.Annotations[annotationContainerID],
			Endpoint:                   podEndpoint,
			ServiceAccountName:         pod.Spec.ServiceAccountName,
			IPNetworks:                 ipNets,
			IPNATs:                     nats,
			Profiles:                   profiles,
			InterfaceName:              VethName(pod.Namespace, pod.Name),
			Ports:                      ports,
			AllowSpoofedSourcePrefixes: spoof,
		},
	}
	if v, ok := pod.Annotations[annotationNetworkStatus]; ok {
		wep.Annotations = map[string]string{annotationNetworkStatus: v}
	}
	return wep, len(ipNets) > 0, nil
}

// podFinished: the pod ran to completion, or is being deleted and the CNI
// plugin has already released its IPs (it blanks the podIP annotation).
func podFinished(pod *corev1.Pod) bool {
	if pod.DeletionTimestamp != nil {
		if ip, ok := pod.Annotations[annotationPodIP]; ok && ip == "" {
			return true
		}
		if ips, ok := pod.Annotations[annotationAWSPodIPs]; ok && ips == "" {
			return true
		}
	}
	switch pod.Status.Phase {
	case corev1.PodFailed, corev1.PodSucceeded, "Completed":
		return true
	}
	return false
}

// podIPNets returns the pod's addresses as /32 or /128 networks. The
// sources are tried in Calico's order: the pod status (kubelet), then
// Calico's CNI annotations (written as soon as the IP is assigned, before
// kubelet reports it), then the AWS VPC CNI's annotation.
func podIPNets(pod *corev1.Pod) ([]string, error) {
	var ips []string
	switch {
	case len(pod.Status.PodIPs) > 0:
		for _, ip := range pod.Status.PodIPs {
			ips = append(ips, ip.IP)
		}
	case pod.Status.PodIP != "":
		ips = []string{pod.Status.PodIP}
	case pod.Annotations[annotationPodIPs] != "":
		ips = strings.Split(pod.Annotations[annotationPodIPs], ",")
	case pod.Annotations[annotationPodIP] != "":
		ips = []string{pod.Annotations[annotationPodIP]}
	case pod.Annotations[annotationAWSPodIPs] != "":
		ips = strings.Split(pod.Annotations[annotationAWSPodIPs], ",")
	default:
		return nil, nil
	}
	out := make([]string, 0, len(ips))
	for _, s := range ips {
		n, err := parseIPOrCIDR(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("pod IP %q: %w", s, err)
		}
		out = append(out, n.String())
	}
	return out, nil
}

// parseIPOrCIDR parses "10.0.0.1" as 10.0.0.1/32 and "10.0.0.1/24" as
// itself (address kept, not masked), as Calico's ParseCIDROrIP does.
func parseIPOrCIDR(s string) (*net.IPNet, error) {
	if ip, n, err := net.ParseCIDR(s); err == nil {
		n.IP = ip
		if v4 := ip.To4(); v4 != nil {
			n.IP = v4
		}
		return n, nil
	}
	ip := net.ParseIP(s)
	if ip == nil {
		return nil, fmt.Errorf("not an IP address or CIDR")
	}
	if v4 := ip.To4(); v4 != nil {
		return &net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}, nil
	}
	return &net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}, nil
}

// floatingIPs maps the cni.projectcalico.org/floatingIPs annotation (a
// JSON list of external IPs) to 1:1 NATs onto the pod's own address of
// the same family.
func floatingIPs(annotations map[string]string, ipNets []string) ([]v3.IPNAT, error) {
	raw, ok := annotations[annotationFloatingIPs]
	if !ok || len(ipNets) == 0 {
		return nil, nil
	}
	var external []string
	if err := json.Unmarshal([]byte(raw), &external); err != nil {
		return nil, fmt.Errorf("annotation %s %q is not a JSON list of IPs: %w", annotationFloatingIPs, raw, err)
	}
	var v4, v6 string
	for _, s := range ipNets {
		ip, n, _ := net.ParseCIDR(s)
		ones, size := n.Mask.Size()
		if ones != size {
			return nil, fmt.Errorf("pod IP %s is not a single address, so cannot take a floating IP", s)
		}
		if ip.To4() != nil {
			v4 = ip.String()
		} else {
			v6 = ip.String()
		}
	}
	var nats []v3.IPNAT
	for _, ext := range external {
		internal := v4
		if strings.Contains(ext, ":") {
			internal = v6
		}
		if internal != "" {
			nats = append(nats, v3.IPNAT{InternalIP: internal, ExternalIP: ext})
		}
	}
	return nats, nil
}

// allowedSourcePrefixes parses cni.projectcalico.org/allowedSourcePrefixes
// (a JSON list of CIDRs the pod may spoof), normalising each CIDR.
func allowedSourcePrefixes(annotations map[string]string) ([]string, error) {
	raw := annotations[annotationAllowedSourcePrefixes]
	if raw == "" {
		return nil, nil
	}
	var prefixes []string
	if err := json.Unmarshal([]byte(raw), &prefixes); err != nil {
		return nil, fmt.Errorf("annotation %s %q is not a JSON list of CIDRs: %w", annotationAllowedSourcePrefixes, raw, err)
	}
	out := make([]string, 0, len(prefixes))
	for _, p := range prefixes {
		_, n, err := net.ParseCIDR(p)
		if err != nil {
			return nil, fmt.Errorf("annotation %s: %q is not a CIDR", annotationAllowedSourcePrefixes, p)
		}
		out = append(out, n.String())
	}
	return out, nil
}

// appendEndpointPorts adds the containers' named or host-mapped ports.
func appendEndpointPorts(ports []v3.WorkloadEndpointPort, containers []corev1.Container) []v3.WorkloadEndpointPort {
	for _, c := range containers {
		for _, cp := range c.Ports {
			if cp.ContainerPort == 0 || (cp.HostPort == 0 && cp.Name == "") {
				continue
			}
			var proto string
			switch cp.Protocol {
			// Lower case, as Calico writes them.
			case corev1.ProtocolTCP, "": // TCP is Kubernetes' default
				proto = "tcp"
			case corev1.ProtocolUDP:
				proto = "udp"
			case corev1.ProtocolSCTP:
				proto = "sctp"
			default:
				continue
			}
			ports = append(ports, v3.WorkloadEndpointPort{
				Name:     cp.Name,
				Protocol: numorstring.ProtocolFromString(proto),
				Port:     uint16(cp.ContainerPort),
				HostPort: uint16(cp.HostPort),
				HostIP:   cp.HostIP,
			})
		}
	}
	return ports
}

func serviceAccountProfileName(namespace, sa string) string {
	if namespace == "" {
		namespace = "default"
	}
	return serviceAccountProfilePrefix + namespace + "." + sa
}
