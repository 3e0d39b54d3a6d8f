package rules

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
)

// Calico's names for NAT outgoing.
const (
	NATPostroutingChain = "cali-POSTROUTING"
	NATOutgoingChain    = "cali-nat-outgoing"
	// AllPoolsSetID and MasqPoolsSetID are the ipset IDs ("cali40" /
	// "cali60" + ID): every pool's CIDR, and the natOutgoing pools'.
	AllPoolsSetID  = "all-ipam-pools"
	MasqPoolsSetID = "masq-ipam-pools"
)

// NATPool is an IP pool as NAT outgoing sees it.
type NATPool struct {
	CIDR        netip.Prefix
	NATOutgoing bool
}

// NATConfig is the NAT outgoing input of one render.
type NATConfig struct {
	Pools []NATPool
	// OutgoingAddress, when set (natOutgoingAddress /
	// FELIX_NATOUTGOINGADDRESS), is the source address used instead of
	// the outgoing interface's (SNAT instead of MASQUERADE).
	OutgoingAddress string
}

// WithNATOutgoing returns rs with Calico's nat-table content for its IP
// version added: nat POSTROUTING -> cali-POSTROUTING -> cali-nat-outgoing,
// which masquerades traffic from a natOutgoing pool to destinations
// outside all pools, matched through the all-ipam-pools and
// masq-ipam-pools ipsets. Without a natOutgoing pool of the version rs is
// returned unchanged (no empty chain is created). rs itself is not
// modified (the renderer may share its slices).
func WithNATOutgoing(rs *Ruleset, cfg NATConfig) *Ruleset {
	var all, masq []string
	for _, p := range cfg.Pools {
		if p.CIDR.Addr().Is4() != (rs.IPVersion == 4) {
			continue
		}
		all = append(all, p.CIDR.Masked().String())
		if p.NATOutgoing {
			masq = append(masq, p.CIDR.Masked().String())
		}
	}
	if len(masq) == 0 {
		return rs
	}
	slices.Sort(all)
	slices.Sort(masq)
	prefix, family := "cali40", "inet"
	if rs.IPVersion == 6 {
		prefix, family = "cali60", "inet6"
	}
	allSet, masqSet := prefix+AllPoolsSetID, prefix+MasqPoolsSetID
	action := "-j MASQUERADE --random-fully"
	if a, err := netip.ParseAddr(cfg.OutgoingAddress); err == nil && a.Is4() == (rs.IPVersion == 4) {
		action = "-j SNAT --to-source " + a.String() + " --random-fully"
	}
	out := *rs
	out.Nat = TableRules{
		Chains: []Chain{
			{Name: NATPostroutingChain, Rules: []Rule{{Action: "-j " + NATOutgoingChain}}},
			{Name: NATOutgoingChain, Rules: []Rule{{
				Match:  "-m set --match-set " + masqSet + " src -m set ! --match-set " + allSet + " dst",
				Action: action,
			}}},
		},
		Hooks: []Hook{{Base: "POSTROUTING", Target: NATPostroutingChain}},
	}
	out.IPSets = append(slices.Clip(rs.IPSets),
		IPSetSpec{Name: allSet, Type: calc.HashNet, Family: family, Members: calc.SortedMembers(all)},
		IPSetSpec{Name: masqSet, Type: calc.HashNet, Family: family, Members: calc.SortedMembers(masq)})
	slices.SortFunc(out.IPSets, func(a, b IPSetSpec) int { return strings.Compare(a.Name, b.Name) })
	return &out
}
