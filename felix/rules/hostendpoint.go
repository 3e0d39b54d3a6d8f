package rules

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
)

// This file holds what is specific to host endpoints: the chain variants,
// dispatch with an all-interfaces default, the raw and mangle tables'
// fixed chains, the failsafe chains and the lookup of host endpoints given
// by expectedIPs (see the package documentation).

// chainKind is which of Calico's endpoint chain variants to render.
type chainKind uint8

const (
	chainNormal    chainKind = iota // filter: host or workload traffic
	chainForward                    // filter: forwarded through a host endpoint
	chainPreDNAT                    // mangle: before DNAT, ingress only
	chainUntracked                  // raw: before conntrack
	// chainMangleEgress is the normal egress policy in mangle
	// POSTROUTING, for host-originated traffic that was DNAT'd: allowing
	// (also an established flow) sets the accept mark and returns.
	chainMangleEgress
)

// dispatch is one dispatch chain being built: per-interface gotos and,
// for an all-interfaces host endpoint, a default target.
type dispatch struct {
	name, flag string // flag: "-i" or "-o"
	rules      []Rule
	def        string // the "*" host endpoint's chain, if any
	skip       []string
}

func (d *dispatch) add(iface, chain string) {
	if iface == "*" {
		d.def = chain
		return
	}
	d.rules = append(d.rules, Rule{Match: d.flag + " " + iface, Action: "-g " + chain})
}

// chain renders the dispatch chain. Interfaces without a host endpoint
// are not felix's: they return, unless a "*" host endpoint takes every
// interface but the skipped ones (workload interfaces, lo).
func (d *dispatch) chain() Chain {
	rules := d.rules
	if d.def != "" {
		for _, sk := range d.skip {
			rules = append(rules, Rule{Match: d.flag + " " + sk, Action: "-j RETURN"})
		}
		rules = append(rules, Rule{Action: "-g " + d.def})
	}
	return Chain{Name: d.name, Rules: rules}
}

// resolveHostInterfaces returns the endpoints sorted by interface, with
// each IP-only host endpoint (no interface name) given the interfaces of
// Config.HostInterfaces that hold one of its expected IPs, as Calico
// does: an interface named by a host endpoint belongs to that one; else
// to the first IP-only host endpoint (by name) that matches it; workload
// interfaces never match.
func (r *renderer) resolveHostInterfaces(eps []calc.Endpoint) []calc.Endpoint {
	out := make([]calc.Endpoint, 0, len(eps))
	named := map[string]bool{}
	var ipOnly []calc.Endpoint
	for _, ep := range eps {
		switch {
		case ep.Kind == calc.Host && ep.Interface == "":
			ipOnly = append(ipOnly, ep)
		default:
			out = append(out, ep)
			if ep.Kind == calc.Host {
				named[ep.Interface] = true
			}
		}
	}
	if len(ipOnly) > 0 && len(r.cfg.HostInterfaces) > 0 {
		slices.SortFunc(ipOnly, func(a, b calc.Endpoint) int { return strings.Compare(a.Key, b.Key) })
		ifaces := slices.Sorted(maps.Keys(r.cfg.HostInterfaces))
		for _, ep := range ipOnly {
			for _, iface := range ifaces {
				if named[iface] || r.isWorkloadIface(iface) || !holdsAny(r.cfg.HostInterfaces[iface], ep.Addrs) {
					continue
				}
				named[iface] = true
				e := ep
				e.Interface = iface
				out = append(out, e)
			}
		}
	}
	slices.SortFunc(out, func(a, b calc.Endpoint) int { return strings.Compare(a.Interface, b.Interface) })
	return out
}

func (r *renderer) isWorkloadIface(iface string) bool {
	for _, p := range r.cfg.WorkloadIfacePrefixes {
		if strings.HasPrefix(iface, p) {
			return true
		}
	}
	return false
}

// holdsAny reports whether one of addrs is one of the expected IPs.
func holdsAny(addrs []netip.Addr, expected []netip.Prefix) bool {
	for _, a := range addrs {
		for _, e := range expected {
			if e.IsSingleIP() && e.Addr() == a.Unmap() {
				return true
			}
		}
	}
	return false
}

// rawStaticChains are the raw table's fixed chains: untracked policy for
// packets from (PREROUTING) and to (OUTPUT) host endpoints; a packet it
// allowed is accepted with the accept mark set, which the filter table
// accepts in turn.
func (r *renderer) rawStaticChains() []Chain {
	c := r.cfg
	pre := []Rule{{Action: r.clearMark(c.MarkAccept | c.MarkPass)}}
	for _, p := range c.WorkloadIfacePrefixes {
		pre = append(pre, Rule{Match: "-i " + p + "+", Action: "-j RETURN", Comment: "Untracked policy is for host endpoints only."})
	}
	pre = append(pre,
		Rule{Action: "-j " + ChainFromHostEp},
		Rule{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT"})
	out := []Rule{
		{Action: r.clearMark(c.MarkAccept | c.MarkPass)},
		{Action: "-j " + ChainToHostEp},
		{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT"},
	}
	// Before conntrack, the replies of failsafe connections must be let
	// through too, or untracked policy could catch half a connection
	// (accepted here, they are tracked and filtered as usual).
	fsIn := append(r.failsafe(c.FailsafeInbound, "-s", "--dports"), r.failsafe(c.FailsafeOutbound, "-s", "--sports")...)
	fsOut := append(r.failsafe(c.FailsafeOutbound, "-d", "--dports"), r.failsafe(c.FailsafeInbound, "-d", "--sports")...)
	return []Chain{
		{Name: ChainPrerouting, Rules: pre},
		{Name: ChainRawOutput, Rules: out},
		{Name: ChainFailsafeIn, Rules: fsIn},
		{Name: ChainFailsafeOut, Rules: fsOut},
	}
}

// mangleStaticChains are the mangle table's fixed chains: preDNAT policy
// for packets from host endpoints (PREROUTING: a packet it allowed is
// accepted with the accept mark set, which the filter table accepts too;
// one it denied is dropped here) and normal egress policy for DNAT'd
// host-originated packets (POSTROUTING).
func (r *renderer) mangleStaticChains() []Chain {
	c := r.cfg
	pre := []Rule{
		{Match: "-m conntrack --ctstate RELATED,ESTABLISHED", Action: "-j ACCEPT"},
		{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT", Comment: "Accepted by untracked policy."},
		{Action: "-j " + ChainFromHostEp},
		{Match: r.markSet(c.MarkAccept), Action: "-j ACCEPT", Comment: "Host endpoint policy accepted packet."},
	}
	// POSTROUTING: host endpoint egress policy for host-originated
	// packets that were DNAT'd (filter OUTPUT saw their pre-DNAT output
	// interface, so it skips them); forwarded packets arrive with the
	// accept mark set at the end of cali-FORWARD and are left alone.
	post := []Rule{
		{Match: r.markSet(c.MarkAccept), Action: "-j RETURN"},
		{Action: r.clearMark(c.MarkAccept | c.MarkPass)},
		{Match: "-m conntrack --ctstate DNAT", Action: "-j " + ChainToHostEp},
		{Match: r.markSet(c.MarkAccept), Action: "-j RETURN", Comment: "Host endpoint policy accepted packet."},
	}
	return []Chain{
		{Name: ChainPrerouting, Rules: pre},
		{Name: ChainManglePostrouting, Rules: post},
		{Name: ChainFailsafeIn, Rules: r.failsafe(c.FailsafeInbound, "-s", "--dports")},
		{Name: ChainFailsafeOut, Rules: r.failsafe(c.FailsafeOutbound, "-d", "--dports")},
	}
}

// failsafe renders always-accepted ports: portFlag is --dports or
// --sports, netFlag (-s or -d) limits an entry with a CIDR; entries whose
// CIDR is of the other IP version are left out.
func (r *renderer) failsafe(ports []ProtoPort, netFlag, portFlag string) []Rule {
	var rules []Rule
	for _, pp := range ports {
		proto := strings.ToLower(pp.Protocol)
		if proto == "" {
			proto = "tcp"
		}
		m := fmt.Sprintf("-p %s -m multiport %s %d", proto, portFlag, pp.Port)
		if pp.Net != "" {
			n, err := netip.ParsePrefix(pp.Net)
			if err != nil {
				a, aerr := netip.ParseAddr(pp.Net)
				if aerr != nil {
					continue
				}
				n = netip.PrefixFrom(a, a.BitLen())
			}
			if n.Addr().Is4() != (r.v == 4) {
				continue
			}
			m = netFlag + " " + n.Masked().String() + " " + m
		}
		rules = append(rules, Rule{Match: m, Action: "-j ACCEPT"})
	}
	return rules
}
