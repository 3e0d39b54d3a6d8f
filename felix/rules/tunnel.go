package rules

import (
	"net/netip"
	"slices"

	"github.com/tabbynet/tabby/felix/calc"
)

// Calico's ipset IDs of the hosts allowed to send encapsulated traffic.
const (
	AllHostsSetID = "all-hosts-net"
	AllVXLANSetID = "all-vxlan-net"
)

// TunnelConfig says which encapsulations the node receives and from
// which hosts.
type TunnelConfig struct {
	// IPIP and VXLAN are on when an IP pool (of the ruleset's version,
	// for VXLAN) uses them.
	IPIP, VXLAN bool
	// AllHosts are every node's addresses (IPIP senders); VXLANHosts the
	// addresses of the nodes with a VTEP.
	AllHosts, VXLANHosts []netip.Addr
	// VXLANPort is the VXLAN UDP port [default 4789].
	VXLANPort string
}

// WithTunnelInput returns rs with Calico's first rules of cali-INPUT for
// the encapsulations in use: IPIP (IPv4 only) and VXLAN packets addressed
// to this host are accepted from known nodes (cali40all-hosts-net,
// cali40all-vxlan-net) and dropped from anyone else, so no other host can
// inject packets into the pod network. cali-OUTPUT accepts this host's
// IPIP and VXLAN packets to those nodes (after host-to-workload traffic
// returns, before host endpoint policy, as Calico's), so that no host
// endpoint policy cuts the encapsulation. rs is not modified; without
// IPIP or VXLAN it is returned unchanged.
func WithTunnelInput(rs *Ruleset, cfg TunnelConfig) *Ruleset {
	ipip := cfg.IPIP && rs.IPVersion == 4
	if !ipip && !cfg.VXLAN {
		return rs
	}
	port := cfg.VXLANPort
	if port == "" {
		port = "4789"
	}
	prefix, family := "cali40", "inet"
	if rs.IPVersion == 6 {
		prefix, family = "cali60", "inet6"
	}
	members := func(as []netip.Addr) calc.MemberList {
		var out []string
		for _, a := range as {
			if a.Is4() == (rs.IPVersion == 4) {
				out = append(out, netip.PrefixFrom(a, a.BitLen()).String())
			}
		}
		return calc.SortedMembers(out)
	}
	var first, outgoing []Rule
	var sets []IPSetSpec
	if ipip {
		set := prefix + AllHostsSetID
		sets = append(sets, IPSetSpec{Name: set, Type: calc.HashNet, Family: family, Members: members(cfg.AllHosts)})
		first = append(first,
			Rule{Match: "-p 4 -m set --match-set " + set + " src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT", Comment: "Allow IPIP packets from Calico hosts"},
			Rule{Match: "-p 4 -m addrtype --dst-type LOCAL", Action: "-j DROP", Comment: "Drop IPIP packets from non-Calico hosts"})
		outgoing = append(outgoing,
			Rule{Match: "-p 4 -m set --match-set " + set + " dst -m addrtype --src-type LOCAL", Action: "-j ACCEPT", Comment: "Allow IPIP packets to other Calico hosts"})
	}
	if cfg.VXLAN {
		set := prefix + AllVXLANSetID
		sets = append(sets, IPSetSpec{Name: set, Type: calc.HashNet, Family: family, Members: members(cfg.VXLANHosts)})
		first = append(first,
			Rule{Match: "-p udp -m multiport --dports " + port + " -m set --match-set " + set + " src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT", Comment: "Allow VXLAN packets from allowed hosts"},
			Rule{Match: "-p udp -m multiport --dports " + port + " -m addrtype --dst-type LOCAL", Action: "-j DROP", Comment: "Drop VXLAN packets from non-allowed hosts"})
		outgoing = append(outgoing,
			Rule{Match: "-p udp -m multiport --dports " + port + " -m addrtype --src-type LOCAL -m set --match-set " + set + " dst", Action: "-j ACCEPT", Comment: "Allow VXLAN packets to other allowed hosts"})
	}
	out := *rs
	out.Chains = slices.Clone(rs.Chains)
	found := false
	for i, c := range out.Chains {
		switch c.Name {
		case ChainFilterInput:
			out.Chains[i] = Chain{Name: c.Name, Rules: append(first, c.Rules...)}
			found = true
		case ChainFilterOutput:
			out.Chains[i] = Chain{Name: c.Name, Rules: slices.Insert(slices.Clone(c.Rules), afterWorkloadReturns(c.Rules), outgoing...)}
		}
	}
	if !found {
		return rs // no cali-INPUT rendered: nothing to put the rules in front of
	}
	out.IPSets = append(slices.Clip(rs.IPSets), sets...)
	slices.SortFunc(out.IPSets, func(a, b IPSetSpec) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return &out
}
