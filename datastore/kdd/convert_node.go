package kdd

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"net"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Annotations on a Kubernetes Node that hold its Calico fields.
const (
	nodeIPv4Address            = "projectcalico.org/IPv4Address"
	nodeIPv6Address            = "projectcalico.org/IPv6Address"
	nodeASNumber               = "projectcalico.org/ASNumber"
	nodeRouteReflectorCluster  = "projectcalico.org/RouteReflectorClusterID"
	nodeIPv4IPIPTunnelAddr     = "projectcalico.org/IPv4IPIPTunnelAddr"
	nodeIPv4VXLANTunnelAddr    = "projectcalico.org/IPv4VXLANTunnelAddr"
	nodeVXLANTunnelMACAddr     = "projectcalico.org/VXLANTunnelMACAddr"
	nodeIPv6VXLANTunnelAddr    = "projectcalico.org/IPv6VXLANTunnelAddr"
	nodeVXLANTunnelMACAddrV6   = "projectcalico.org/VXLANTunnelMACAddrV6"
	nodeWireguardIPv4IfaceAddr = "projectcalico.org/IPv4WireguardInterfaceAddr"
	nodeWireguardIPv6IfaceAddr = "projectcalico.org/IPv6WireguardInterfaceAddr"
	nodeWireguardPublicKey     = "projectcalico.org/WireguardPublicKey"
	nodeWireguardPublicKeyV6   = "projectcalico.org/WireguardPublicKeyV6"
	// nodeKubeLabels keeps a copy of the Kubernetes labels in the Calico
	// node's annotations, so that writing the node back can tell the
	// inherited labels from Calico's own.
	nodeKubeLabels = "projectcalico.org/kube-labels"
	// Calico's own labels and annotations of a native-backed object.
	calicoLabelsAnnotation      = "projectcalico.org/labels"
	calicoAnnotationsAnnotation = "projectcalico.org/annotations"
)

// K8sNodeToCalico reads a Calico Node from a Kubernetes Node: Calico's
// labels and annotations from projectcalico.org/labels and /annotations
// with the Kubernetes labels on top, BGP and tunnel fields from the
// projectcalico.org/* annotations (an invalid one is ignored, as Calico
// does), pod CIDRs into status, and the Kubernetes addresses after the
// BGP ones in spec.addresses.
func K8sNodeToCalico(kn *corev1.Node) (*v3.Node, error) {
	n := &v3.Node{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name:              kn.Name,
			ResourceVersion:   kn.ResourceVersion,
			UID:               kn.UID,
			CreationTimestamp: kn.CreationTimestamp,
		},
	}
	ann := kn.Annotations
	if raw, ok := ann[calicoLabelsAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), &n.Labels); err != nil {
			slog.Warn("ignoring unreadable Calico labels on Kubernetes node", "node", kn.Name, "annotation", calicoLabelsAnnotation, "err", err)
		}
	}
	if raw, ok := ann[calicoAnnotationsAnnotation]; ok {
		if err := json.Unmarshal([]byte(raw), &n.Annotations); err != nil {
			slog.Warn("ignoring unreadable Calico annotations on Kubernetes node", "node", kn.Name, "annotation", calicoAnnotationsAnnotation, "err", err)
		}
	}
	// Kubernetes labels win over Calico's; remember them for write-back.
	if len(kn.Labels) > 0 && n.Labels == nil {
		n.Labels = map[string]string{}
	}
	maps.Copy(n.Labels, kn.Labels)
	kubeLabels, err := json.Marshal(kn.Labels)
	if err != nil {
		return nil, err
	}
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[nodeKubeLabels] = string(kubeLabels)

	bgp := v3.NodeBGPSpec{
		IPv4Address:             validAnnotation(kn, nodeIPv4Address, isIPv(4)),
		IPv6Address:             validAnnotation(kn, nodeIPv6Address, isIPv(6)),
		RouteReflectorClusterID: validAnnotation(kn, nodeRouteReflectorCluster, isIPv(4)),
		IPv4IPIPTunnelAddr:      validAnnotation(kn, nodeIPv4IPIPTunnelAddr, isIPv(4)),
	}
	if s, ok := ann[nodeASNumber]; ok {
		if asn, err := numorstring.ASNumberFromString(s); err == nil {
			bgp.ASNumber = &asn
		} else {
			slog.Info("ignoring invalid annotation on Kubernetes node", "node", kn.Name, "annotation", nodeASNumber, "err", err)
		}
	}
	if bgp != (v3.NodeBGPSpec{}) {
		n.Spec.BGP = &bgp
	}
	wg := v3.NodeWireguardSpec{
		InterfaceIPv4Address: validAnnotation(kn, nodeWireguardIPv4IfaceAddr, isIPv(4)),
		InterfaceIPv6Address: validAnnotation(kn, nodeWireguardIPv6IfaceAddr, isIPv(6)),
	}
	if wg != (v3.NodeWireguardSpec{}) {
		n.Spec.Wireguard = &wg
	}
	n.Spec.IPv4VXLANTunnelAddr = validAnnotation(kn, nodeIPv4VXLANTunnelAddr, isIPv(4))
	n.Spec.VXLANTunnelMACAddr = validAnnotation(kn, nodeVXLANTunnelMACAddr, isMAC)
	n.Spec.IPv6VXLANTunnelAddr = validAnnotation(kn, nodeIPv6VXLANTunnelAddr, isIPv(6))
	n.Spec.VXLANTunnelMACAddrV6 = validAnnotation(kn, nodeVXLANTunnelMACAddrV6, isMAC)
	n.Spec.OrchRefs = []v3.OrchRef{{NodeName: kn.Name, Orchestrator: orchestratorK8s}}

	st := v3.NodeStatus{
		WireguardPublicKey:   ann[nodeWireguardPublicKey],
		WireguardPublicKeyV6: ann[nodeWireguardPublicKeyV6],
	}
	if len(kn.Spec.PodCIDRs) > 0 {
		st.PodCIDRs = append([]string(nil), kn.Spec.PodCIDRs...)
	}
	if st.WireguardPublicKey != "" || st.WireguardPublicKeyV6 != "" || len(st.PodCIDRs) > 0 {
		n.Status = &st
	}

	if n.Spec.BGP != nil {
		for _, a := range []string{n.Spec.BGP.IPv4Address, n.Spec.BGP.IPv6Address} {
			if a != "" {
				n.Spec.Addresses = append(n.Spec.Addresses, v3.NodeAddress{Address: a, Type: v3.NodeAddressCalicoNodeIP})
			}
		}
	}
	for _, a := range kn.Status.Addresses {
		switch a.Type {
		case corev1.NodeInternalIP:
			n.Spec.Addresses = append(n.Spec.Addresses, v3.NodeAddress{Address: a.Address, Type: v3.NodeAddressInternalIP})
		case corev1.NodeExternalIP:
			n.Spec.Addresses = append(n.Spec.Addresses, v3.NodeAddress{Address: a.Address, Type: v3.NodeAddressExternalIP})
		}
	}
	return n, nil
}

// MergeCalicoNodeIntoK8sNode writes a Calico Node's fields into a copy of
// its Kubernetes Node's annotations (the inverse of K8sNodeToCalico). The
// Kubernetes labels are never touched: a Calico label that shadows one is
// lost, as in Calico. Fields Kubernetes owns (addresses, pod CIDRs,
// orchRefs) are not written back.
func MergeCalicoNodeIntoK8sNode(n *v3.Node, kn *corev1.Node) (*corev1.Node, error) {
	kn = kn.DeepCopy()
	labels := maps.Clone(n.Labels)
	annotations := maps.Clone(n.Annotations)
	if raw := annotations[nodeKubeLabels]; raw != "" {
		var inherited map[string]string
		if err := json.Unmarshal([]byte(raw), &inherited); err != nil {
			return nil, fmt.Errorf("annotation %s: %w", nodeKubeLabels, err)
		}
		for k := range inherited {
			delete(labels, k)
		}
	}
	delete(annotations, nodeKubeLabels)

	if kn.Annotations == nil {
		kn.Annotations = map[string]string{}
	}
	a := kn.Annotations
	setJSON := func(key string, m map[string]string) error {
		if len(m) == 0 {
			delete(a, key)
			return nil
		}
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		a[key] = string(b)
		return nil
	}
	if err := setJSON(calicoLabelsAnnotation, labels); err != nil {
		return nil, err
	}
	if err := setJSON(calicoAnnotationsAnnotation, annotations); err != nil {
		return nil, err
	}
	set := func(key, v string) {
		if v == "" {
			delete(a, key)
		} else {
			a[key] = v
		}
	}
	set(nodeIPv4VXLANTunnelAddr, n.Spec.IPv4VXLANTunnelAddr)
	set(nodeVXLANTunnelMACAddr, n.Spec.VXLANTunnelMACAddr)
	set(nodeIPv6VXLANTunnelAddr, n.Spec.IPv6VXLANTunnelAddr)
	set(nodeVXLANTunnelMACAddrV6, n.Spec.VXLANTunnelMACAddrV6)

	var bgp v3.NodeBGPSpec
	if n.Spec.BGP != nil {
		bgp = *n.Spec.BGP
	}
	set(nodeIPv4Address, bgp.IPv4Address)
	set(nodeIPv6Address, bgp.IPv6Address)
	set(nodeIPv4IPIPTunnelAddr, bgp.IPv4IPIPTunnelAddr)
	set(nodeRouteReflectorCluster, bgp.RouteReflectorClusterID)
	asn := ""
	if bgp.ASNumber != nil {
		asn = bgp.ASNumber.String()
	}
	set(nodeASNumber, asn)

	var wg v3.NodeWireguardSpec
	if n.Spec.Wireguard != nil {
		wg = *n.Spec.Wireguard
	}
	set(nodeWireguardIPv4IfaceAddr, wg.InterfaceIPv4Address)
	set(nodeWireguardIPv6IfaceAddr, wg.InterfaceIPv6Address)

	var st v3.NodeStatus
	if n.Status != nil {
		st = *n.Status
	}
	set(nodeWireguardPublicKey, st.WireguardPublicKey)
	set(nodeWireguardPublicKeyV6, st.WireguardPublicKeyV6)
	return kn, nil
}

// validAnnotation returns a node annotation if valid, else "" (logged).
func validAnnotation(kn *corev1.Node, key string, valid func(string) bool) string {
	v := kn.Annotations[key]
	if v == "" {
		return ""
	}
	if !valid(v) {
		slog.Info("ignoring invalid annotation on Kubernetes node", "node", kn.Name, "annotation", key, "value", v)
		return ""
	}
	return v
}

// isIPv accepts an address of the given IP version, with or without a
// prefix length.
func isIPv(version int) func(string) bool {
	return func(s string) bool {
		n, err := parseIPOrCIDR(s)
		if err != nil {
			return false
		}
		return (n.IP.To4() != nil) == (version == 4)
	}
}

func isMAC(s string) bool {
	_, err := net.ParseMAC(s)
	return err == nil
}
