package rules

import (
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/tabbynet/tabby/felix/calc"
)

func TestWithTunnelInput(t *testing.T) {
	in := &Ruleset{IPVersion: 4, Chains: []Chain{{Name: ChainFilterInput, Rules: []Rule{{Match: "-i cali+", Action: "-g cali-wl-to-host"}}},
		{Name: ChainFilterOutput, Rules: []Rule{{Match: "-o cali+", Action: "-j RETURN", Comment: "Host to workload is allowed."}, {Action: "-j cali-to-host-endpoint"}}}}}
	hosts := []netip.Addr{netip.MustParseAddr("172.30.1.11"), netip.MustParseAddr("172.30.1.10"), netip.MustParseAddr("fd00::1")}
	got := WithTunnelInput(in, TunnelConfig{IPIP: true, VXLAN: true, AllHosts: hosts, VXLANHosts: hosts[:1]})
	want := []Rule{
		{Match: "-p 4 -m set --match-set cali40all-hosts-net src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT", Comment: "Allow IPIP packets from Calico hosts"},
		{Match: "-p 4 -m addrtype --dst-type LOCAL", Action: "-j DROP", Comment: "Drop IPIP packets from non-Calico hosts"},
		{Match: "-p udp -m multiport --dports 4789 -m set --match-set cali40all-vxlan-net src -m addrtype --dst-type LOCAL", Action: "-j ACCEPT", Comment: "Allow VXLAN packets from allowed hosts"},
		{Match: "-p udp -m multiport --dports 4789 -m addrtype --dst-type LOCAL", Action: "-j DROP", Comment: "Drop VXLAN packets from non-allowed hosts"},
		{Match: "-i cali+", Action: "-g cali-wl-to-host"},
	}
	if diff := cmp.Diff(want, got.Chains[0].Rules); diff != "" {
		t.Errorf("cali-INPUT (-want +got):\n%s", diff)
	}
	wantOut := []Rule{
		{Match: "-o cali+", Action: "-j RETURN", Comment: "Host to workload is allowed."},
		{Match: "-p 4 -m set --match-set cali40all-hosts-net dst -m addrtype --src-type LOCAL", Action: "-j ACCEPT", Comment: "Allow IPIP packets to other Calico hosts"},
		{Match: "-p udp -m multiport --dports 4789 -m addrtype --src-type LOCAL -m set --match-set cali40all-vxlan-net dst", Action: "-j ACCEPT", Comment: "Allow VXLAN packets to other allowed hosts"},
		{Action: "-j cali-to-host-endpoint"},
	}
	if diff := cmp.Diff(wantOut, got.Chains[1].Rules); diff != "" {
		t.Errorf("cali-OUTPUT (-want +got):\n%s", diff)
	}
	for _, c := range got.Chains {
		for _, r := range c.Rules {
			if _, err := NftRules("filter", 4, r); err != nil {
				t.Errorf("%s rule %+v: no nftables translation: %v", c.Name, r, err)
			}
		}
	}
	if diff := cmp.Diff([]IPSetSpec{
		{Name: "cali40all-hosts-net", Type: "hash:net", Family: "inet", Members: calc.Members("172.30.1.10/32", "172.30.1.11/32")},
		{Name: "cali40all-vxlan-net", Type: "hash:net", Family: "inet", Members: calc.Members("172.30.1.11/32")},
	}, got.IPSets); diff != "" {
		t.Errorf("ipsets (-want +got):\n%s", diff)
	}
	if len(in.Chains[0].Rules) != 1 || len(in.Chains[1].Rules) != 2 || len(in.IPSets) != 0 {
		t.Error("the input ruleset was modified")
	}
	v6 := WithTunnelInput(&Ruleset{IPVersion: 6, Chains: in.Chains}, TunnelConfig{IPIP: true, AllHosts: hosts})
	if len(v6.Chains[0].Rules) != 1 {
		t.Errorf("IPIP rules on IPv6: %+v", v6.Chains[0].Rules)
	}
	if none := WithTunnelInput(in, TunnelConfig{}); none != in {
		t.Error("without encapsulation the ruleset changed")
	}
}
