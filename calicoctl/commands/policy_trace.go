package commands

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// How a trace works: each end of the flow is resolved to a workload
// endpoint, a host endpoint or a bare IP; the path lists the endpoint
// chains felix renders that the flow's first packet goes through (see
// tracePath); for each, felix's own calculation runs for the chain's
// node, narrowed to the endpoint and the flow's two addresses
// (calc.ComputeFocused), and felix/rules follows the packet through the
// chain as it is rendered (rules.TraceChain). With staged policies the
// same path is traced again over the policies as they would be with the
// staged ones enforced: the pending verdicts.

// traceEnd is one end of a flow.
type traceEnd struct {
	spec string
	wep  *v3.WorkloadEndpoint
	hep  *v3.HostEndpoint
	addr netip.Addr
}

func (e traceEnd) node() string {
	switch {
	case e.wep != nil:
		return e.wep.Spec.Node
	case e.hep != nil:
		return e.hep.Spec.Node
	}
	return ""
}

func (e traceEnd) ref() calc.EndpointRef {
	switch {
	case e.wep != nil:
		return calc.EndpointRef{Kind: calc.Workload, Key: e.wep.Namespace + "/" + e.wep.Name}
	case e.hep != nil:
		return calc.EndpointRef{Kind: calc.Host, Key: e.hep.Name}
	}
	return calc.EndpointRef{}
}

// peer is the end as the report names it.
func (e traceEnd) peer() TracePeer {
	p := TracePeer{Node: e.node()}
	if e.addr.IsValid() {
		p.IP = e.addr.String()
	}
	switch {
	case e.wep != nil:
		p.Kind, p.Namespace, p.Name, p.Workload = v3.KindWorkloadEndpoint, e.wep.Namespace, e.wep.Name, e.wep.Spec.Pod
	case e.hep != nil:
		p.Kind, p.Name = v3.KindHostEndpoint, e.hep.Name
	default:
		p.Kind = "IP"
	}
	return p
}

// resolveEnd finds what spec names: "hostendpoint/<name>", "<ns>/<pod>"
// (a workload endpoint of the pod, or of that name) or an IP (the
// endpoint holding it, or an address outside the cluster).
func resolveEnd(objs []any, spec string) (traceEnd, error) {
	end := traceEnd{spec: spec}
	if name, ok := strings.CutPrefix(spec, "hostendpoint/"); ok {
		for _, o := range objs {
			if h, ok := o.(*v3.HostEndpoint); ok && h.Name == name {
				end.hep = h
				return end, nil
			}
		}
		return end, fmt.Errorf("%s: no HostEndpoint %q", spec, name)
	}
	if a, err := netip.ParseAddr(spec); err == nil {
		end.addr = a.Unmap()
		end.wep, end.hep = endpointHolding(objs, end.addr)
		return end, nil
	}
	ns, pod, ok := strings.Cut(spec, "/")
	if !ok || ns == "" || pod == "" {
		return end, fmt.Errorf("%q is not <namespace>/<pod>, hostendpoint/<name> or an IP address", spec)
	}
	for _, o := range objs {
		if w, ok := o.(*v3.WorkloadEndpoint); ok && w.Namespace == ns && (w.Spec.Pod == pod || w.Name == pod) {
			if end.wep == nil || w.Name < end.wep.Name {
				end.wep = w
			}
		}
	}
	if end.wep == nil {
		return end, fmt.Errorf("%s: no WorkloadEndpoint of pod %q in namespace %q", spec, pod, ns)
	}
	return end, nil
}

// endpointHolding is the workload (first) or host endpoint whose
// addresses hold a single address a.
func endpointHolding(objs []any, a netip.Addr) (*v3.WorkloadEndpoint, *v3.HostEndpoint) {
	var hep *v3.HostEndpoint
	for _, o := range objs {
		switch o := o.(type) {
		case *v3.WorkloadEndpoint:
			if holds(o.Spec.IPNetworks, a) {
				return o, nil
			}
		case *v3.HostEndpoint:
			if hep == nil && holds(o.Spec.ExpectedIPs, a) {
				hep = o
			}
		}
	}
	return nil, hep
}

func holds(nets []string, a netip.Addr) bool {
	for _, n := range nets {
		if p, err := parsePrefixOrAddr(n); err == nil && p.Contains(a) && (p.IsSingleIP() || p.Bits() == p.Addr().BitLen()) {
			return true
		}
	}
	return false
}

func parsePrefixOrAddr(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen()), err
}

// addrs are an endpoint's addresses of IP version v (4 or 6).
func (e traceEnd) addrs(v int) []netip.Addr {
	var nets []string
	switch {
	case e.wep != nil:
		nets = e.wep.Spec.IPNetworks
	case e.hep != nil:
		nets = e.hep.Spec.ExpectedIPs
	default:
		return []netip.Addr{e.addr}
	}
	var out []netip.Addr
	for _, n := range nets {
		if p, err := parsePrefixOrAddr(n); err == nil && (p.Addr().Is4() == (v == 4)) {
			out = append(out, p.Addr())
		}
	}
	return out
}

// pickAddrs fills in the addresses of both ends: those given as IPs,
// else each endpoint's first address of a family both ends have (IPv4
// first).
func pickAddrs(from, to *traceEnd) error {
	for _, v := range []int{4, 6} {
		if from.addr.IsValid() && ipVersion(from.addr) != v || to.addr.IsValid() && ipVersion(to.addr) != v {
			continue
		}
		fa, ta := from.addrs(v), to.addrs(v)
		if from.addr.IsValid() {
			fa = []netip.Addr{from.addr}
		}
		if to.addr.IsValid() {
			ta = []netip.Addr{to.addr}
		}
		if len(fa) > 0 && len(ta) > 0 {
			from.addr, to.addr = fa[0], ta[0]
			return nil
		}
	}
	return fmt.Errorf("%s and %s have no addresses of one IP version", from.spec, to.spec)
}

func ipVersion(a netip.Addr) int {
	if a.Is4() {
		return 4
	}
	return 6
}

// parsePort reads --port: tcp/80, udp/53, sctp/9, icmp, icmp/8 (type),
// icmp/3/1 (type and code), icmpv6/128, or a protocol number.
func parsePort(s string, srcPort uint16) (rules.Packet, error) {
	pkt := rules.Packet{SrcPort: srcPort}
	parts := strings.Split(s, "/")
	proto := numorstring.ProtocolFromString(parts[0])
	if n, err := strconv.ParseUint(parts[0], 10, 8); err == nil {
		proto = numorstring.ProtocolFromInt(uint8(n))
	}
	if err := proto.Validate(); err != nil {
		return pkt, fmt.Errorf("--port %q: %v (want tcp/80, udp/53, icmp/8 ...)", s, err)
	}
	pkt.Protocol = proto.Number()
	nums := make([]int, 0, 2)
	for _, p := range parts[1:] {
		n, err := strconv.ParseUint(p, 10, 16)
		if err != nil {
			return pkt, fmt.Errorf("--port %q: %q is not a number", s, p)
		}
		nums = append(nums, int(n))
	}
	switch {
	case proto.SupportsPorts():
		if len(nums) != 1 || nums[0] == 0 {
			return pkt, fmt.Errorf("--port %q: %s needs one port, as %s/80", s, parts[0], parts[0])
		}
		pkt.DstPort = uint16(nums[0])
	case proto.IsICMP() || proto.IsICMPv6():
		if len(nums) > 2 {
			return pkt, fmt.Errorf("--port %q: want icmp, icmp/TYPE or icmp/TYPE/CODE", s)
		}
		pkt.ICMPType = 8 // echo request
		if proto.IsICMPv6() {
			pkt.ICMPType = 128
		}
		if len(nums) > 0 {
			pkt.ICMPType = nums[0]
		}
		if len(nums) > 1 {
			pkt.ICMPCode = nums[1]
		}
	default:
		if len(nums) > 0 {
			return pkt, fmt.Errorf("--port %q: protocol %s has no ports", s, parts[0])
		}
	}
	return pkt, nil
}
