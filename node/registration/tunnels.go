package registration

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Calico's IPAM handles and allocation attributes of tunnel addresses.
const (
	AttributeNode      = "node"
	AttributeType      = "type"
	AttributeTypeIPIP  = "ipipTunnelAddress"
	AttributeTypeVXLAN = "vxlanTunnelAddress"
	// AttributeTypeVXLANV6 is the IPv6 VXLAN tunnel address's type.
	AttributeTypeVXLANV6 = "vxlanV6TunnelAddress"
	// AttributeTypeWireguard(V6) are the WireGuard device addresses' types.
	AttributeTypeWireguard   = "wireguardTunnelAddress"
	AttributeTypeWireguardV6 = "wireguardV6TunnelAddress"
)

// IPIPHandle and VXLANHandle are the IPAM handles of a node's tunnel
// addresses.
func IPIPHandle(node string) string  { return "ipip-tunnel-addr-" + node }
func VXLANHandle(node string) string { return "vxlan-tunnel-addr-" + node }

// VXLANV6Handle is the IPAM handle of a node's IPv6 VXLAN tunnel address.
func VXLANV6Handle(node string) string { return "vxlan-v6-tunnel-addr-" + node }

// WireguardHandle and WireguardV6Handle are the IPAM handles of a node's
// WireGuard device addresses.
func WireguardHandle(node string) string   { return "wireguard-tunnel-addr-" + node }
func WireguardV6Handle(node string) string { return "wireguard-v6-tunnel-addr-" + node }

// TunnelOptions are calico-node's settings that shape its tunnel
// addresses.
type TunnelOptions struct {
	// WireguardHostEncryption is FELIX_WIREGUARDHOSTENCRYPTIONENABLED in
	// calico-node's own environment (Calico's calico-node reads only that,
	// not the FelixConfiguration): the WireGuard devices get no address
	// from a pool (one held is released); they use the node's own.
	WireguardHostEncryption bool
}

// tunnelKind is one kind of tunnel address.
type tunnelKind struct {
	v6        bool
	wireguard bool
	handle    func(string) string
	attrType  string
	// needed says whether a pool wants this kind of tunnel.
	needed func(*v3.IPPool) bool
	// nodeNeeds, when set, says whether the node wants it at all.
	nodeNeeds func(*v3.Node) bool
	get       func(*v3.Node) string
	set       func(*v3.Node, string)
}

var tunnelKinds = []tunnelKind{{
	handle: IPIPHandle, attrType: AttributeTypeIPIP,
	needed: func(p *v3.IPPool) bool { return p.Spec.IPIPMode == "Always" || p.Spec.IPIPMode == "CrossSubnet" },
	get: func(n *v3.Node) string {
		if n.Spec.BGP == nil {
			return ""
		}
		return n.Spec.BGP.IPv4IPIPTunnelAddr
	},
	set: func(n *v3.Node, a string) {
		if n.Spec.BGP == nil {
			n.Spec.BGP = &v3.NodeBGPSpec{}
		}
		n.Spec.BGP.IPv4IPIPTunnelAddr = a
	},
}, {
	handle: VXLANHandle, attrType: AttributeTypeVXLAN,
	needed: func(p *v3.IPPool) bool { return p.Spec.VXLANMode == "Always" || p.Spec.VXLANMode == "CrossSubnet" },
	get:    func(n *v3.Node) string { return n.Spec.IPv4VXLANTunnelAddr },
	set:    func(n *v3.Node, a string) { n.Spec.IPv4VXLANTunnelAddr = a },
}, {
	v6: true, handle: VXLANV6Handle, attrType: AttributeTypeVXLANV6,
	needed: func(p *v3.IPPool) bool { return p.Spec.VXLANMode == "Always" || p.Spec.VXLANMode == "CrossSubnet" },
	get:    func(n *v3.Node) string { return n.Spec.IPv6VXLANTunnelAddr },
	set:    func(n *v3.Node, a string) { n.Spec.IPv6VXLANTunnelAddr = a },
}, wireguardKind(false), wireguardKind(true)}

// wireguardKind is the WireGuard device address of one IP version, as
// Calico's calico-node allocates it: from any enabled pool of that
// version, once felix runs WireGuard there (the Node has a public key).
func wireguardKind(v6 bool) tunnelKind {
	k := tunnelKind{v6: v6, wireguard: true, handle: WireguardHandle, attrType: AttributeTypeWireguard,
		needed: func(*v3.IPPool) bool { return true },
		nodeNeeds: func(n *v3.Node) bool {
			return n.Status != nil && n.Status.WireguardPublicKey != ""
		},
		get: func(n *v3.Node) string {
			if n.Spec.Wireguard == nil {
				return ""
			}
			return n.Spec.Wireguard.InterfaceIPv4Address
		},
		set: func(n *v3.Node, a string) { setWireguardAddr(n, a, false) },
	}
	if v6 {
		k.handle, k.attrType = WireguardV6Handle, AttributeTypeWireguardV6
		k.nodeNeeds = func(n *v3.Node) bool { return n.Status != nil && n.Status.WireguardPublicKeyV6 != "" }
		k.get = func(n *v3.Node) string {
			if n.Spec.Wireguard == nil {
				return ""
			}
			return n.Spec.Wireguard.InterfaceIPv6Address
		}
		k.set = func(n *v3.Node, a string) { setWireguardAddr(n, a, true) }
	}
	return k
}

// setWireguardAddr records (or clears) a WireGuard device address; an
// empty wireguard spec is removed, as Calico's.
func setWireguardAddr(n *v3.Node, a string, v6 bool) {
	if n.Spec.Wireguard == nil {
		n.Spec.Wireguard = &v3.NodeWireguardSpec{}
	}
	if v6 {
		n.Spec.Wireguard.InterfaceIPv6Address = a
	} else {
		n.Spec.Wireguard.InterfaceIPv4Address = a
	}
	if *n.Spec.Wireguard == (v3.NodeWireguardSpec{}) {
		n.Spec.Wireguard = nil
	}
}

// EnsureTunnelAddrs gives the node an IPIP, a VXLAN and/or an IPv6 VXLAN
// tunnel address when an enabled pool of that IP version uses that
// encapsulation, and WireGuard device addresses while the Node has a
// WireGuard public key of that version (spec.wireguard) and host
// encryption is off (allocated from such a pool under Calico's handle)
// and releases it when none does; the
// Node's bgp.ipv4IPIPTunnelAddr, ipv4VXLANTunnelAddr, vxlanTunnelMACAddr,
// ipv6VXLANTunnelAddr and vxlanTunnelMACAddrV6 follow. An address already recorded that is still in
// a pool of its kind is kept.
func EnsureTunnelAddrs(ctx context.Context, c datastore.Client, alloc *ipam.Allocator, nodeName string, o TunnelOptions) error {
	list, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing IP pools: %w", err)
	}
	for _, k := range tunnelKinds {
		var pools []string
		var cidrs []netip.Prefix
		for _, r := range list.Items {
			p := r.(*v3.IPPool)
			cidr, err := netip.ParsePrefix(p.Spec.CIDR)
			if err != nil || cidr.Addr().Is6() != k.v6 || p.Spec.Disabled || !k.needed(p) {
				continue
			}
			pools = append(pools, p.Name)
			cidrs = append(cidrs, cidr)
		}
		if k.wireguard && o.WireguardHostEncryption {
			pools, cidrs = nil, nil // the device uses the node's own address
		}
		if err := ensureTunnel(ctx, c, alloc, nodeName, k, pools, cidrs); err != nil {
			return err
		}
	}
	return nil
}

func ensureTunnel(ctx context.Context, c datastore.Client, alloc *ipam.Allocator, nodeName string, k tunnelKind, pools []string, cidrs []netip.Prefix) error {
	node, err := getNode(ctx, c, nodeName)
	if err != nil {
		return err
	}
	handle := k.handle(nodeName)
	cur := k.get(node)
	if k.nodeNeeds != nil && !k.nodeNeeds(node) {
		pools = nil
	}
	if len(pools) == 0 {
		if cur == "" {
			return nil
		}
		if _, err := alloc.ReleaseByHandle(ctx, handle); err != nil && !errors.Is(err, ipam.ErrHandleNotFound) {
			return fmt.Errorf("releasing %s: %w", handle, err)
		}
		return updateNode(ctx, c, nodeName, func(n *v3.Node) { k.set(n, "") })
	}
	if a, err := netip.ParseAddr(cur); err == nil && inAny(cidrs, a) {
		if ips, err := alloc.IPsByHandle(ctx, handle); err == nil && len(ips) == 1 && ips[0] == a {
			return ensureMAC(ctx, c, nodeName, k)
		}
	}
	// A new address: give back any old one first (a pool changed).
	if _, err := alloc.ReleaseByHandle(ctx, handle); err != nil && !errors.Is(err, ipam.ErrHandleNotFound) {
		return fmt.Errorf("releasing the old %s: %w", handle, err)
	}
	args := ipam.AutoAssignArgs{
		HandleID: handle, Hostname: nodeName, Use: v3.IPPoolAllowedUseTunnel,
		Attrs: map[string]string{AttributeNode: nodeName, AttributeType: k.attrType},
	}
	if k.v6 {
		args.Num6, args.IPv6Pools = 1, pools
	} else {
		args.Num4, args.IPv4Pools = 1, pools
	}
	ips, err := alloc.AutoAssign(ctx, args)
	if err != nil {
		return fmt.Errorf("allocating the %s address of node %s: %w", k.attrType, nodeName, err)
	}
	if err := updateNode(ctx, c, nodeName, func(n *v3.Node) { k.set(n, ips[0].String()) }); err != nil {
		_, _ = alloc.ReleaseByHandle(ctx, handle)
		return err
	}
	return ensureMAC(ctx, c, nodeName, k)
}

// ensureMAC records a VTEP MAC for a node with a VXLAN address and none
// (vxlanTunnelMACAddr, vxlanTunnelMACAddrV6).
func ensureMAC(ctx context.Context, c datastore.Client, nodeName string, k tunnelKind) error {
	return updateNode(ctx, c, nodeName, func(n *v3.Node) {
		switch k.attrType {
		case AttributeTypeVXLAN:
			if n.Spec.VXLANTunnelMACAddr == "" {
				n.Spec.VXLANTunnelMACAddr = randomMAC().String()
			}
		case AttributeTypeVXLANV6:
			if n.Spec.VXLANTunnelMACAddrV6 == "" {
				n.Spec.VXLANTunnelMACAddrV6 = randomMAC().String()
			}
		}
	})
}

func randomMAC() net.HardwareAddr {
	m := make(net.HardwareAddr, 6)
	_, _ = rand.Read(m)
	m[0] = m[0]&0xfe | 0x02 // unicast, locally administered
	return m
}

func inAny(cidrs []netip.Prefix, a netip.Addr) bool {
	for _, c := range cidrs {
		if c.Contains(a) {
			return true
		}
	}
	return false
}

func getNode(ctx context.Context, c datastore.Client, name string) (*v3.Node, error) {
	r, err := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: name})
	if err != nil {
		return nil, fmt.Errorf("reading node %s: %w", name, err)
	}
	return r.(*v3.Node), nil
}

// updateNode applies change to the current Node and writes it when it
// changed, retrying on a conflicting concurrent update.
func updateNode(ctx context.Context, c datastore.Client, name string, change func(*v3.Node)) error {
	for attempt := 0; ; attempt++ {
		n, err := getNode(ctx, c, name)
		if err != nil {
			return err
		}
		before := n.DeepCopy()
		change(n)
		if equalNodeSpec(before, n) {
			return nil
		}
		_, err = c.Update(ctx, n)
		if err == nil {
			return nil
		}
		if !errors.Is(err, datastore.ErrConflict) || attempt >= 5 {
			return fmt.Errorf("updating node %s: %w", name, err)
		}
	}
}
