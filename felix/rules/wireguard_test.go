package rules

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestWithWireguard: Calico's WireGuard rules: the port accepted into and
// out of the host ahead of host endpoint policy, and with host encryption
// the raw mark for the reverse-path check; nothing without WireGuard for
// the ruleset's version. Every rule translates to nftables.
func TestWithWireguard(t *testing.T) {
	base := &Ruleset{IPVersion: 4,
		Chains: []Chain{
			{Name: ChainFilterInput, Rules: []Rule{{Match: "-i cali+", Action: "-g cali-wl-to-host"}}},
			{Name: ChainFilterOutput, Rules: []Rule{
				{Match: "-m mark --mark 0x10000/0x10000", Action: "-j ACCEPT"},
				{Match: "-o cali+", Action: "-j RETURN", Comment: "Host to workload is allowed."},
				{Action: "-j MARK --set-xmark 0x0/0x30000"},
			}},
		},
		Raw: TableRules{Chains: []Chain{
			{Name: ChainPrerouting, Rules: []Rule{{Action: "-j MARK --set-xmark 0x0/0xf0000"}, {Match: "-i cali+", Action: "-j RETURN"}}},
			{Name: "cali-from-host-endpoint"},
		}},
	}
	wg := WireguardRules{Port: 51820, Mark: 0x100000, Interfaces: []string{"wireguard.cali", "wg-v6.cali"}}
	got := WithWireguard(base, wg, []string{"cali"})
	wantIn := []Rule{
		{Match: "-p udp -m multiport --dports 51820 -m addrtype --dst-type LOCAL", Action: "-j ACCEPT", Comment: "Allow incoming IPv4 Wireguard packets"},
		{Match: "-i cali+", Action: "-g cali-wl-to-host"},
	}
	if diff := cmp.Diff(wantIn, got.Chains[0].Rules); diff != "" {
		t.Errorf("cali-INPUT (-want +got):\n%s", diff)
	}
	wantOut := []Rule{
		base.Chains[1].Rules[0], base.Chains[1].Rules[1],
		{Match: "-p udp -m multiport --dports 51820 -m addrtype --src-type LOCAL", Action: "-j ACCEPT", Comment: "Allow outgoing IPv4 Wireguard packets"},
		base.Chains[1].Rules[2],
	}
	if diff := cmp.Diff(wantOut, got.Chains[1].Rules); diff != "" {
		t.Errorf("cali-OUTPUT (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(base.Raw, got.Raw); diff != "" {
		t.Errorf("raw without host encryption (-want +got):\n%s", diff)
	}
	if len(base.Chains[0].Rules) != 1 || len(base.Chains[1].Rules) != 3 {
		t.Error("the input ruleset was modified")
	}

	wg.HostEncryption = true
	got = WithWireguard(base, wg, []string{"cali"})
	wantRaw := []Chain{
		{Name: ChainPrerouting, Rules: []Rule{{Action: "-j MARK --set-xmark 0x0/0xf0000"}, {Action: "-j cali-wireguard-incoming-mark"}, {Match: "-i cali+", Action: "-j RETURN"}}},
		{Name: "cali-from-host-endpoint"},
		{Name: "cali-wireguard-incoming-mark", Rules: []Rule{
			{Match: "-i lo", Action: "-j RETURN"},
			{Match: "-i wireguard.cali", Action: "-j RETURN"},
			{Match: "-i wg-v6.cali", Action: "-j RETURN"},
			{Match: "-i cali+", Action: "-j RETURN"},
			{Action: "-j MARK --set-xmark 0x100000/0x100000"},
		}},
	}
	if diff := cmp.Diff(wantRaw, got.Raw.Chains); diff != "" {
		t.Errorf("raw with host encryption (-want +got):\n%s", diff)
	}
	for _, c := range append(append([]Chain{}, got.Chains...), got.Raw.Chains...) {
		for _, r := range c.Rules {
			if _, err := NftRules("filter", 4, r); err != nil {
				t.Errorf("%s rule %+v: no nftables translation: %v", c.Name, r, err)
			}
		}
	}

	if v6 := WithWireguard(&Ruleset{IPVersion: 6, Chains: base.Chains}, wg, nil); len(v6.Chains[0].Rules) != 1 {
		t.Errorf("IPv4 WireGuard rules in the IPv6 ruleset: %+v", v6.Chains[0].Rules)
	}
	if none := WithWireguard(base, WireguardRules{}, nil); none != base {
		t.Error("without WireGuard the ruleset changed")
	}
}
