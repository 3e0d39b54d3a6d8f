package rules

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tabbynet/tabby/felix/calc"
)

func TestWithNATOutgoing(t *testing.T) {
	pools := []NATPool{
		{CIDR: netip.MustParsePrefix("10.70.0.0/16"), NATOutgoing: true},
		{CIDR: netip.MustParsePrefix("10.80.0.0/16")},
		{CIDR: netip.MustParsePrefix("fd00:70::/64"), NATOutgoing: true},
	}
	rs := &Ruleset{IPVersion: 4, IPSets: []IPSetSpec{{Name: "cali40s:zzz"}}}
	got := WithNATOutgoing(rs, NATConfig{Pools: pools})
	want := `*nat
:cali-POSTROUTING - [0:0]
:cali-nat-outgoing - [0:0]
-A cali-POSTROUTING -m comment --comment "cali:` + got.Nat.Chains[0].Hashed()[0].Hash + `" -j cali-nat-outgoing
-A cali-nat-outgoing -m comment --comment "cali:` + got.Nat.Chains[1].Hashed()[0].Hash + `" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE --random-fully
-I POSTROUTING 1 -m comment --comment "cali:` + Hook{Base: "POSTROUTING", Target: NATPostroutingChain}.Rule().Hash + `" -j cali-POSTROUTING
COMMIT
`
	nat := got.Tables()[3]
	if diff := cmp.Diff(want, nat.RestoreText()); diff != "" {
		t.Errorf("nat table (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]IPSetSpec{
		{Name: "cali40all-ipam-pools", Type: "hash:net", Family: "inet", Members: calc.Members("10.70.0.0/16", "10.80.0.0/16")},
		{Name: "cali40masq-ipam-pools", Type: "hash:net", Family: "inet", Members: calc.Members("10.70.0.0/16")},
		{Name: "cali40s:zzz"},
	}, got.IPSets); diff != "" {
		t.Errorf("ipsets (-want +got):\n%s", diff)
	}
	if len(rs.IPSets) != 1 || len(rs.Nat.Chains) != 0 {
		t.Error("the input ruleset was modified")
	}

	v6 := WithNATOutgoing(&Ruleset{IPVersion: 6}, NATConfig{Pools: pools, OutgoingAddress: "192.0.2.9"})
	if m := v6.Nat.Chains[1].Rules[0]; m.Match != "-m set --match-set cali60masq-ipam-pools src -m set ! --match-set cali60all-ipam-pools dst" || m.Action != "-j MASQUERADE --random-fully" {
		t.Errorf("IPv6 rule %+v (an IPv4 outgoing address does not apply to IPv6)", m)
	}
	snat := WithNATOutgoing(&Ruleset{IPVersion: 4}, NATConfig{Pools: pools, OutgoingAddress: "192.0.2.9"})
	if a := snat.Nat.Chains[1].Rules[0].Action; a != "-j SNAT --to-source 192.0.2.9 --random-fully" {
		t.Errorf("natOutgoingAddress action %q", a)
	}
	// No natOutgoing pool: no nat content at all (no empty chains).
	none := &Ruleset{IPVersion: 4}
	if got := WithNATOutgoing(none, NATConfig{Pools: pools[1:2]}); got != none || len(got.Tables()) != 3 {
		t.Errorf("without a natOutgoing pool the ruleset changed: %+v", got)
	}
}
