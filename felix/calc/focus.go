package calc

import (
	"net/netip"
	"slices"
	"strconv"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Focus narrows the calculation to what one flow needs (a policy trace):
// one local endpoint's policy lists and the ipset members that can decide
// packets between a few addresses.
type Focus struct {
	// Endpoint is the local endpoint (of Input.Node) whose tiers,
	// policies and profiles are wanted; the zero ref wants none.
	Endpoint EndpointRef
	// Addrs are the flow's addresses. Of the other endpoints and network
	// sets only those holding one of them are loaded: an ipset member
	// that holds none of the addresses cannot match the flow's packets.
	Addrs []netip.Addr
}

// ComputeFocused is Compute over the objects f needs: every policy,
// tier and profile, the focus endpoint, and the endpoints and network
// sets holding one of f.Addrs (so the Result's ipsets hold only those
// members, and its Endpoints only the local ones among them; problems of
// the objects left out are not reported). It runs the same loaders,
// selection and set resolution as Compute; what it leaves out is what
// the flow's packets cannot touch.
func ComputeFocused(in Input, f Focus) *Result {
	return compute(in, f.keeps)
}

// keeps reports whether o is needed: anything that is not an endpoint or
// network set, the focus endpoint, and the items holding a focus address.
func (f Focus) keeps(o any) bool {
	var nets []string
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		if f.Endpoint.Kind == Workload && f.Endpoint.Key == o.Namespace+"/"+o.Name {
			return true
		}
		nets = o.Spec.IPNetworks
	case *v3.HostEndpoint:
		if f.Endpoint.Kind == Host && f.Endpoint.Key == o.Name {
			return true
		}
		nets = o.Spec.ExpectedIPs
	case *v3.NetworkSet:
		nets = o.Spec.Nets
	case *v3.GlobalNetworkSet:
		nets = o.Spec.Nets
	default:
		return true
	}
	prefixes, err := parseNets(nets)
	if err != nil {
		return true // loaded, so that its problem is reported
	}
	return slices.ContainsFunc(prefixes, func(p netip.Prefix) bool {
		return slices.ContainsFunc(f.Addrs, p.Contains)
	})
}

// IPPortMember is the hash:ip,port ipset member of a named-port set for
// address a, IP protocol proto and port: how the sets' members are
// written, for a reader that looks one up.
func IPPortMember(a netip.Addr, proto uint8, port uint16) string {
	return a.String() + "," + protoName(proto) + ":" + strconv.FormatUint(uint64(port), 10)
}
