package wireguard

import (
	"net/netip"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// Calico's defaults and constants.
const (
	DefaultInterface   = "wireguard.cali"
	DefaultInterfaceV6 = "wg-v6.cali"
	DefaultPort        = 51820
	DefaultPortV6      = 51821
	// DefaultRulePriority is wireguardRoutingRulePriority's default.
	DefaultRulePriority = 99
	// TableIndex and TableIndexV6 are the routing tables Calico's felix
	// takes first from its RouteTableRanges (1-250 by default).
	TableIndex   = 1
	TableIndexV6 = 2
	// Mark is the firewall mark bit Calico allocates to WireGuard with
	// its default IptablesMarkMask (after accept, pass, scratch0/1).
	Mark = 0x100000
	// Overhead and OverheadV6 are what WireGuard adds to a packet
	// (Calico's wireguardMTUOverhead, wireguardV6MTUOverhead).
	Overhead   = 60
	OverheadV6 = 80
)

// Config is one IP version's WireGuard settings.
type Config struct {
	Enabled bool
	// V6 selects the IP version this Config is for.
	V6            bool
	InterfaceName string
	ListenPort    int
	FirewallMark  int
	// RulePriority and Table are the routing rule's priority and table.
	RulePriority, Table int
	// MTU is the device's MTU; 0 is the host's MTU minus Overhead.
	MTU                int
	KeepAlive          time.Duration
	EncryptHostTraffic bool
}

// DefaultConfig is Calico's default for one IP version, disabled.
func DefaultConfig(v6 bool) Config {
	if v6 {
		return Config{V6: true, InterfaceName: DefaultInterfaceV6, ListenPort: DefaultPortV6, FirewallMark: Mark, RulePriority: DefaultRulePriority, Table: TableIndexV6}
	}
	return Config{InterfaceName: DefaultInterface, ListenPort: DefaultPort, FirewallMark: Mark, RulePriority: DefaultRulePriority, Table: TableIndex}
}

// Desired is one IP version's WireGuard state for one node.
type Desired struct {
	// Config is what it was computed for (Enabled false: remove it all).
	Config Config
	// Addr is the device's address (the Node's wireguard interface
	// address); invalid when it has none.
	Addr netip.Addr
	// Peers are the other nodes that can be peered, sorted by node.
	Peers []Peer
	// Routes are the routing table's routes, sorted by destination.
	Routes []Route
}

// Peer is one other node.
type Peer struct {
	Node      string
	PublicKey wgtypes.Key
	Endpoint  netip.AddrPort
	// AllowedIPs are sorted.
	AllowedIPs []netip.Prefix
}

// RouteKind is what a route in the WireGuard table does.
type RouteKind uint8

const (
	// ViaDevice sends the destination into the WireGuard device.
	ViaDevice RouteKind = iota
	// Throw returns the lookup to the next rule (the main table): for
	// this node's own addresses and nodes that cannot be peered.
	Throw
	// Blackhole drops it: a destination that must be encrypted while
	// the device cannot exist (the kernel has no WireGuard).
	Blackhole
)

func (k RouteKind) String() string {
	if k > Blackhole {
		return "other"
	}
	return [...]string{"dev", "throw", "blackhole"}[k]
}

// Route is one route of the WireGuard table.
type Route struct {
	Dst  netip.Prefix
	Kind RouteKind
	// Node is whose destination it is (for logs and tests).
	Node string
	// Host marks the node's own address (host encryption).
	Host bool
}

// Problem is input the computation had to skip.
type Problem struct {
	Node, Reason string
}
