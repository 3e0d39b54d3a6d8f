package routes

import (
	"net"
	"net/netip"

	"github.com/tabbynet/tabby/felix/wireguard"
)

// Calico's device names and VXLAN parameters.
const (
	VXLANDevice   = "vxlan.calico"
	VXLANDeviceV6 = "vxlan-v6.calico"
	IPIPDevice    = "tunl0"
	VXLANVNI      = 4096
	VXLANPort     = 4789
	// VXLANOverhead and IPIPOverhead are what encapsulation adds to a
	// packet (Calico's MTU arithmetic).
	VXLANOverhead   = 50
	VXLANOverheadV6 = 70
	IPIPOverhead    = 20
	// RouteProtocol is Calico's default DeviceRouteProtocol (RTPROT_BOOT).
	RouteProtocol = 3
)

// Desired is the routing state one node should have.
type Desired struct {
	// VXLAN is the node's VTEP; nil when no pool uses VXLAN (the device
	// is then removed). VXLANv6 likewise for IPv6 (vxlan-v6.calico).
	VXLAN, VXLANv6 *VTEP
	// IPIP is tunl0's address; invalid when no pool uses IPIP.
	IPIP netip.Addr
	// Routes to remote blocks of both IP versions, sorted by destination.
	Routes []Route
	// Neighbors are the permanent ARP/NDP entries on the VXLAN devices
	// (remote VTEP address -> MAC), FDB the forwarding entries (remote
	// VTEP MAC -> the remote node's address); both sorted.
	Neighbors []Neighbor
	FDB       []FDBEntry
	// Pools are the pool CIDRs: routes via a gateway into them are the
	// manager's.
	Pools []netip.Prefix
	// Wireguard is the WireGuard state per IP version (IPv4, IPv6);
	// Config.Enabled false removes it.
	Wireguard [2]wireguard.Desired
}

// VTEP is a VXLAN tunnel endpoint: the device's address, its MAC and
// the node address the UDP packets leave from.
type VTEP struct {
	Addr   netip.Addr
	MAC    net.HardwareAddr
	Parent netip.Addr
}

// Route is one route to a remote block. Dev "" means the kernel chooses
// the interface towards Gw (a direct route on the underlay).
type Route struct {
	Dst    netip.Prefix
	Gw     netip.Addr
	Dev    string
	OnLink bool
	// Node is the block's node (for logs and tests).
	Node string
	// Workload marks a local workload's route (Dst on its host-side
	// interface, scope link): the CNI's, which the driver only restores
	// when missing and only removes when unknown for a grace period.
	Workload bool
}

// Neighbor is a permanent ARP/NDP entry on a VXLAN device.
type Neighbor struct {
	Dev string
	IP  netip.Addr
	MAC string
}

// FDBEntry tells a VXLAN device where a remote VTEP MAC lives.
type FDBEntry struct {
	Dev string
	MAC string
	Dst netip.Addr
}

// Problem is input the computation had to skip.
type Problem struct {
	Kind, Name, Reason string
}
