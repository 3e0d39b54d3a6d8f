package rules

import (
	"fmt"
	"slices"
	"strings"
)

// ChainWireguardIncomingMark is Calico's raw chain marking packets that
// arrive from the underlay when host traffic is encrypted.
const ChainWireguardIncomingMark = "cali-wireguard-incoming-mark"

// WireguardRules is WireGuard as the rules see it.
type WireguardRules struct {
	// Port and PortV6 are the listening ports of the IPv4 and IPv6
	// devices; 0 when WireGuard is off for that version.
	Port, PortV6 int
	// HostEncryption is wireguardHostEncryptionEnabled.
	HostEncryption bool
	// Mark is WireGuard's firewall mark bit; Interfaces the devices'
	// names (both versions').
	Mark       uint32
	Interfaces []string
}

// WithWireguard returns rs with Calico's WireGuard rules for rs's IP
// version when WireGuard is on there: cali-INPUT accepts UDP to the
// WireGuard port addressed to this host, cali-OUTPUT accepts UDP to it
// sent from this host (after host-to-workload traffic returns, before
// host endpoint policy), so that no host endpoint policy cuts the tunnel
// (WireGuard's own peers and allowed IPs decide who may use it). With host
// encryption, raw cali-PREROUTING (right after its mark reset) jumps to
// cali-wireguard-incoming-mark, which sets the WireGuard mark on packets
// from anything but lo, the WireGuard devices and workloads: with
// src_valid_mark the reverse-path check of a packet from another node's
// address then looks past the WireGuard table (where that address routes
// through the tunnel) to the main table. rs is not modified.
// Apply it before WithTunnelInput (whose rules come first in cali-INPUT
// and cali-OUTPUT, as in Calico) and after WithWorkloadRPF.
func WithWireguard(rs *Ruleset, wg WireguardRules, workloadPrefixes []string) *Ruleset {
	port, what := wg.Port, "IPv4"
	if rs.IPVersion == 6 {
		port, what = wg.PortV6, "IPv6"
	}
	if port == 0 {
		return rs
	}
	match := fmt.Sprintf("-p udp -m multiport --dports %d", port)
	out := *rs
	out.Chains = slices.Clone(rs.Chains)
	for i, c := range out.Chains {
		switch c.Name {
		case ChainFilterInput:
			in := Rule{Match: match + " -m addrtype --dst-type LOCAL", Action: "-j ACCEPT", Comment: "Allow incoming " + what + " Wireguard packets"}
			out.Chains[i] = Chain{Name: c.Name, Rules: append([]Rule{in}, c.Rules...)}
		case ChainFilterOutput:
			o := Rule{Match: match + " -m addrtype --src-type LOCAL", Action: "-j ACCEPT", Comment: "Allow outgoing " + what + " Wireguard packets"}
			at := afterWorkloadReturns(c.Rules)
			out.Chains[i] = Chain{Name: c.Name, Rules: slices.Insert(slices.Clone(c.Rules), at, o)}
		}
	}
	if !wg.HostEncryption {
		return &out
	}
	out.Raw.Chains = slices.Clone(rs.Raw.Chains)
	for i, c := range out.Raw.Chains {
		if c.Name != ChainPrerouting || len(c.Rules) == 0 {
			continue
		}
		out.Raw.Chains[i] = Chain{Name: c.Name, Rules: slices.Insert(slices.Clone(c.Rules), 1, Rule{Action: "-j " + ChainWireguardIncomingMark})}
		out.Raw.Chains = append(out.Raw.Chains, wireguardIncomingMark(wg, workloadPrefixes))
		slices.SortFunc(out.Raw.Chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
		break
	}
	return &out
}

// afterWorkloadReturns is the index in cali-OUTPUT after its
// host-to-workload RETURN rules (1 when there are none: after the
// accepted-mark rule).
func afterWorkloadReturns(rs []Rule) int {
	at := min(1, len(rs))
	for i, r := range rs {
		if r.Comment == "Host to workload is allowed." {
			at = i + 1
		}
	}
	return at
}

// wireguardIncomingMark is Calico's cali-wireguard-incoming-mark.
func wireguardIncomingMark(wg WireguardRules, workloadPrefixes []string) Chain {
	rs := []Rule{{Match: "-i lo", Action: "-j RETURN"}}
	for _, n := range wg.Interfaces {
		rs = append(rs, Rule{Match: "-i " + n, Action: "-j RETURN"})
	}
	for _, p := range workloadPrefixes {
		rs = append(rs, Rule{Match: "-i " + p + "+", Action: "-j RETURN"})
	}
	rs = append(rs, Rule{Action: fmt.Sprintf("-j MARK --set-xmark %#x/%#x", wg.Mark, wg.Mark)})
	return Chain{Name: ChainWireguardIncomingMark, Rules: rs}
}
