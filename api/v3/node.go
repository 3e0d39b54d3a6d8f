package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindNode is the kind of a Calico node: one host running the node agent,
// with its BGP identity and tunnel addresses.
const KindNode = "Node"

// Node is a host's Calico-specific state. The node agent writes most of it
// at start-up (addresses, tunnel addresses, keys); users set BGP fields such
// as the AS number or a route reflector cluster ID. Its name is the host's
// node name.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=nodes
type Node struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec NodeSpec `json:"spec,omitempty"`
	// Status is written by the node agent. (A pointer, unlike Calico's Go
	// type, so that an absent status stays absent when re-encoded.)
	Status *NodeStatus `json:"status,omitempty"`
}

// NodeSpec is the content of a Node.
type NodeSpec struct {
	// BGP is the node's BGP configuration; when set it may not be empty.
	BGP *NodeBGPSpec `json:"bgp,omitempty"`
	// IPv4VXLANTunnelAddr is the IPv4 address of the node's VXLAN device.
	IPv4VXLANTunnelAddr string `json:"ipv4VXLANTunnelAddr,omitempty"`
	// VXLANTunnelMACAddr is the MAC address of the IPv4 VXLAN device.
	VXLANTunnelMACAddr string `json:"vxlanTunnelMACAddr,omitempty"`
	// IPv6VXLANTunnelAddr is the IPv6 address of the node's VXLAN device.
	IPv6VXLANTunnelAddr string `json:"ipv6VXLANTunnelAddr,omitempty"`
	// VXLANTunnelMACAddrV6 is the MAC address of the IPv6 VXLAN device.
	VXLANTunnelMACAddrV6 string `json:"vxlanTunnelMACAddrV6,omitempty"`
	// OrchRefs tie the node to its names in orchestrators (e.g. k8s).
	OrchRefs []OrchRef `json:"orchRefs,omitempty"`
	// Wireguard holds the node's WireGuard interface addresses.
	Wireguard *NodeWireguardSpec `json:"wireguard,omitempty"`
	// Addresses are addresses at which the node can be reached.
	Addresses []NodeAddress `json:"addresses,omitempty"`
	// Interfaces are the node's network interfaces and their addresses.
	Interfaces []NodeInterface `json:"interfaces,omitempty"`
}

// NodeAddress is one address of a node.
type NodeAddress struct {
	// Address is an IP, or an IP with its prefix length (e.g. 10.0.0.5/24).
	Address string `json:"address"`
	// Type is CalicoNodeIP (the node's BGP address), InternalIP or
	// ExternalIP (copied from the Kubernetes node).
	Type string `json:"type,omitempty"`
}

// Node address types.
const (
	NodeAddressCalicoNodeIP = "CalicoNodeIP"
	NodeAddressInternalIP   = "InternalIP"
	NodeAddressExternalIP   = "ExternalIP"
)

// NodeInterface is one network interface of a node.
type NodeInterface struct {
	// Name of the interface.
	Name string `json:"name,omitempty"`
	// Addresses of the interface (IPs or CIDRs).
	Addresses []string `json:"addresses,omitempty"`
}

// NodeStatus is what the node agent reports about a node.
type NodeStatus struct {
	// WireguardPublicKey is the node's IPv4 WireGuard public key (base64).
	WireguardPublicKey string `json:"wireguardPublicKey,omitempty"`
	// WireguardPublicKeyV6 is the node's IPv6 WireGuard public key (base64).
	WireguardPublicKeyV6 string `json:"wireguardPublicKeyV6,omitempty"`
	// PodCIDRs mirrors the Kubernetes node's spec.podCIDRs.
	PodCIDRs []string `json:"podCIDRs,omitempty"`
}

// OrchRef names a node in an orchestrator.
type OrchRef struct {
	// NodeName is the node's name in the orchestrator.
	NodeName string `json:"nodeName,omitempty"`
	// Orchestrator is the orchestrator, e.g. k8s.
	Orchestrator string `json:"orchestrator"`
}

// NodeBGPSpec is a node's BGP configuration.
type NodeBGPSpec struct {
	// ASNumber is the node's AS number; unset means the one from the default
	// BGPConfiguration.
	ASNumber *numorstring.ASNumber `json:"asNumber,omitempty"`
	// IPv4Address is the node's IPv4 address and prefix length, e.g.
	// 10.0.0.5/24. Needed when the node runs BGP over IPv4.
	IPv4Address string `json:"ipv4Address,omitempty"`
	// IPv6Address is the node's IPv6 address and prefix length. Needed only
	// for BGP over IPv6.
	IPv6Address string `json:"ipv6Address,omitempty"`
	// IPv4IPIPTunnelAddr is the IPv4 address of the node's IP-in-IP device.
	IPv4IPIPTunnelAddr string `json:"ipv4IPIPTunnelAddr,omitempty"`
	// RouteReflectorClusterID, an IPv4 address, makes the node a route
	// reflector of that cluster.
	RouteReflectorClusterID string `json:"routeReflectorClusterID,omitempty"`
}

// NodeWireguardSpec holds a node's WireGuard interface addresses.
type NodeWireguardSpec struct {
	// InterfaceIPv4Address is the IPv4 address of the WireGuard device.
	InterfaceIPv4Address string `json:"interfaceIPv4Address,omitempty"`
	// InterfaceIPv6Address is the IPv6 address of the WireGuard device.
	InterfaceIPv6Address string `json:"interfaceIPv6Address,omitempty"`
}

// NodeList is a list of Node.
// +kubebuilder:object:root=true
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Node `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindNode, Plural: "nodes",
		New:     func() Resource { return &Node{TypeMeta: typeMeta(KindNode)} },
		NewList: func() runtimeObject { return &NodeList{TypeMeta: typeMeta(KindNode + "List")} },
	})
}

// Default implements Resource; Node has no defaults.
func (n *Node) Default() {}

// Validate implements Resource, with the field rules of Calico's v3 Node.
func (n *Node) Validate() ErrorList {
	errs := validateMeta(&n.ObjectMeta, false)
	p := Path("spec")
	s := &n.Spec

	if b := s.BGP; b != nil {
		bp := p.Child("bgp")
		if *b == (NodeBGPSpec{}) {
			errs.Add(bp, "is empty: set at least one field, or leave bgp out")
		}
		netCheckNodeCIDR(bp.Child("ipv4Address"), b.IPv4Address, 4, &errs)
		netCheckNodeCIDR(bp.Child("ipv6Address"), b.IPv6Address, 6, &errs)
		if b.IPv4IPIPTunnelAddr != "" {
			netCheckIP(bp.Child("ipv4IPIPTunnelAddr"), b.IPv4IPIPTunnelAddr, 4, &errs)
		}
		if b.RouteReflectorClusterID != "" {
			netCheckIP(bp.Child("routeReflectorClusterID"), b.RouteReflectorClusterID, 4, &errs)
		}
	}
	if s.IPv4VXLANTunnelAddr != "" {
		netCheckIP(p.Child("ipv4VXLANTunnelAddr"), s.IPv4VXLANTunnelAddr, 4, &errs)
	}
	if s.IPv6VXLANTunnelAddr != "" {
		netCheckIP(p.Child("ipv6VXLANTunnelAddr"), s.IPv6VXLANTunnelAddr, 6, &errs)
	}
	if s.VXLANTunnelMACAddr != "" {
		netCheckMAC(p.Child("vxlanTunnelMACAddr"), s.VXLANTunnelMACAddr, &errs)
	}
	if s.VXLANTunnelMACAddrV6 != "" {
		netCheckMAC(p.Child("vxlanTunnelMACAddrV6"), s.VXLANTunnelMACAddrV6, &errs)
	}
	for i, o := range s.OrchRefs {
		if o.Orchestrator == "" {
			errs.Add(p.Child("orchRefs").Index(i).Child("orchestrator"), "is required, e.g. k8s")
		}
	}
	if w := s.Wireguard; w != nil {
		wp := p.Child("wireguard")
		if w.InterfaceIPv4Address != "" {
			netCheckIP(wp.Child("interfaceIPv4Address"), w.InterfaceIPv4Address, 4, &errs)
		}
		if w.InterfaceIPv6Address != "" {
			netCheckIP(wp.Child("interfaceIPv6Address"), w.InterfaceIPv6Address, 6, &errs)
		}
	}
	for i, a := range s.Addresses {
		ap := p.Child("addresses").Index(i)
		if a.Address == "" {
			errs.Add(ap.Child("address"), "is required")
		} else if _, _, _, err := netParseIPOrCIDR(a.Address); err != nil {
			errs.Add(ap.Child("address"), err.Error())
		}
		oneOf(ap.Child("type"), a.Type, &errs, NodeAddressCalicoNodeIP, NodeAddressInternalIP, NodeAddressExternalIP)
	}
	for i, iface := range s.Interfaces {
		ip := p.Child("interfaces").Index(i)
		if iface.Name != "" {
			netCheckResourceName(ip.Child("name"), iface.Name, &errs)
		}
		for j, a := range iface.Addresses {
			if _, _, _, err := netParseIPOrCIDR(a); err != nil {
				errs.Add(ip.Child("addresses").Index(j), err.Error())
			}
		}
	}

	if st := n.Status; st != nil {
		sp := Path("status")
		if k := st.WireguardPublicKey; k != "" {
			netCheckWireguardKey(sp.Child("wireguardPublicKey"), k, &errs)
		}
		if k := st.WireguardPublicKeyV6; k != "" {
			netCheckWireguardKey(sp.Child("wireguardPublicKeyV6"), k, &errs)
		}
		for i, c := range st.PodCIDRs {
			if _, _, _, err := netParseIPOrCIDR(c); err != nil {
				errs.Add(sp.Child("podCIDRs").Index(i), err.Error())
			}
		}
	}
	return errs
}

// netCheckNodeCIDR checks a node BGP address: an IP of the given version,
// optionally with a prefix length (host bits are expected to be set).
func netCheckNodeCIDR(p Path, s string, version int, errs *ErrorList) {
	if s == "" {
		return
	}
	_, _, v, err := netParseIPOrCIDR(s)
	switch {
	case err != nil:
		errs.Add(p, err.Error())
	case v != version:
		errs.Addf(p, "%q is not an IPv%d address", s, version)
	}
}
