package wireguard

import (
	"net"
	"net/netip"
	"slices"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/tabbynet/tabby/felix/infra"
)

// PeerPlan is the change that brings a device to the desired peers.
type PeerPlan struct {
	// Config is the wgctrl change (without a private key; see NeedKey).
	Config wgtypes.Config
	// NeedKey: the device has no private key; the driver generates one.
	NeedKey bool
	// Added, Updated and Removed count peers, for logs and tests.
	Added, Updated, Removed int
}

// Empty says whether the plan changes nothing.
func (p PeerPlan) Empty() bool {
	c := p.Config
	return !p.NeedKey && c.ListenPort == nil && c.FirewallMark == nil && len(c.Peers) == 0
}

// PlanPeers diffs d against the device dev holds: its listening port,
// firewall mark and peers. Only peers that differ are touched (a peer
// whose endpoint, allowed IPs or keep-alive changed is rewritten whole;
// a peer not wanted is removed), so a node, key or block change costs one
// peer.
func PlanPeers(d Desired, dev *wgtypes.Device) PeerPlan {
	var p PeerPlan
	c := d.Config
	if dev.ListenPort != c.ListenPort {
		p.Config.ListenPort = &c.ListenPort
	}
	if dev.FirewallMark != c.FirewallMark {
		p.Config.FirewallMark = &c.FirewallMark
	}
	p.NeedKey = dev.PrivateKey == wgtypes.Key{}
	want := make(map[wgtypes.Key]Peer, len(d.Peers))
	for _, pe := range d.Peers {
		want[pe.PublicKey] = pe
	}
	have := make(map[wgtypes.Key]wgtypes.Peer, len(dev.Peers))
	for _, hp := range dev.Peers {
		have[hp.PublicKey] = hp
		if _, ok := want[hp.PublicKey]; !ok {
			p.Config.Peers = append(p.Config.Peers, wgtypes.PeerConfig{PublicKey: hp.PublicKey, Remove: true})
			p.Removed++
		}
	}
	for _, pe := range d.Peers {
		hp, ok := have[pe.PublicKey]
		if ok && samePeer(pe, hp, c.KeepAlive) {
			continue
		}
		if ok {
			p.Updated++
		} else {
			p.Added++
		}
		ka := c.KeepAlive
		p.Config.Peers = append(p.Config.Peers, wgtypes.PeerConfig{PublicKey: pe.PublicKey,
			Endpoint: net.UDPAddrFromAddrPort(pe.Endpoint), ReplaceAllowedIPs: true,
			AllowedIPs: ipNets(pe.AllowedIPs), PersistentKeepaliveInterval: &ka})
	}
	return p
}

// samePeer says whether the device's peer hp is pe.
func samePeer(pe Peer, hp wgtypes.Peer, keepAlive time.Duration) bool {
	if hp.Endpoint == nil || hp.Endpoint.AddrPort() != pe.Endpoint ||
		hp.PersistentKeepaliveInterval.Truncate(time.Second) != keepAlive.Truncate(time.Second) {
		return false
	}
	got := make([]netip.Prefix, 0, len(hp.AllowedIPs))
	for _, n := range hp.AllowedIPs {
		if p, ok := prefixOf(n); ok {
			got = append(got, p)
		}
	}
	slices.SortFunc(got, infra.ComparePrefix)
	return slices.Equal(got, pe.AllowedIPs)
}

func prefixOf(n net.IPNet) (netip.Prefix, bool) {
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := n.Mask.Size()
	return netip.PrefixFrom(a.Unmap(), ones).Masked(), true
}

func ipNets(ps []netip.Prefix) []net.IPNet {
	out := make([]net.IPNet, 0, len(ps))
	for _, p := range ps {
		out = append(out, net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())})
	}
	return out
}

// PlanRoutes diffs the wanted routes of the WireGuard table against
// those it holds: a route whose destination is held with another kind is
// deleted and added again.
func PlanRoutes(want, have []Route) (add, del []Route) {
	held := make(map[netip.Prefix]RouteKind, len(have))
	for _, r := range have {
		held[r.Dst] = r.Kind
	}
	wanted := make(map[netip.Prefix]RouteKind, len(want))
	for _, r := range want {
		wanted[r.Dst] = r.Kind
		if k, ok := held[r.Dst]; !ok || k != r.Kind {
			add = append(add, r)
		}
	}
	for _, r := range have {
		if k, ok := wanted[r.Dst]; !ok || k != r.Kind {
			del = append(del, r)
		}
	}
	sortRoutes(add)
	sortRoutes(del)
	return add, del
}
