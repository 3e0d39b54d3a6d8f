package calc

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Focus narrows the calculation to what one flow needs (a policy trace):
// a few endpoints' policy lists and the ipset members that can decide
// packets between a few addresses.
type Focus struct {
	// Endpoints are the endpoints whose tiers, policies and profiles are
	// wanted (those of Input.Node are the Result's local endpoints).
	Endpoints []EndpointRef
	// Addrs are the flow's addresses. Of the other endpoints and network
	// sets only those holding one of them are loaded: an ipset member
	// that holds none of the addresses cannot match the flow's packets.
	Addrs []netip.Addr
}

// ComputeFocused is Compute over the objects f needs (Narrow): the
// policies that can select a focus endpoint, every tier and profile, the
// focus endpoints, and the endpoints and network sets holding one of
// f.Addrs (so the Result's ipsets hold only those
// members, and its Endpoints only the local ones among them; problems of
// the objects left out are not reported). It runs the same loaders,
// selection and set resolution as Compute; what it leaves out is what
// the flow's packets cannot touch.
func ComputeFocused(in Input, f Focus) *Result {
	return Compute(f.Narrow(in))
}

// Narrow is the part of in that f needs. Narrowing once and computing
// for several nodes (setting Node) gives each node's ComputeFocused.
func (f Focus) Narrow(in Input) Input {
	return Input{
		Node:                  in.Node,
		WorkloadEndpoints:     keepOnly(in.WorkloadEndpoints, f),
		HostEndpoints:         keepOnly(in.HostEndpoints, f),
		NetworkPolicies:       keepOnly(in.NetworkPolicies, f),
		GlobalNetworkPolicies: in.GlobalNetworkPolicies,
		Tiers:                 in.Tiers,
		Profiles:              in.Profiles,
		NetworkSets:           keepOnly(in.NetworkSets, f),
		GlobalNetworkSets:     keepOnly(in.GlobalNetworkSets, f),
		Staged:                keepOnly(in.Staged, f),
		// A services match selects by its Service's slices wherever the
		// policy is: every slice is kept.
		EndpointSlices:  in.EndpointSlices,
		FollowsServices: in.FollowsServices,
	}
}

func keepOnly[T any](objs []T, f Focus) []T {
	var out []T
	for _, o := range objs {
		if f.keeps(o) {
			out = append(out, o)
		}
	}
	return out
}

// keeps reports whether o is needed: a focus endpoint, the items
// holding a focus address, the policies that can select a focus
// endpoint (a NetworkPolicy selects only endpoints of its own namespace,
// and no host endpoint), and every other kind.
func (f Focus) keeps(o any) bool {
	var nets []string
	if s, ok := o.(*StagedPolicy); ok {
		o = s.Policy // a staged policy selects as the policy it stages
	}
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		if f.isEndpoint(Workload, o.Namespace, o.Name) {
			return true
		}
		nets = o.Spec.IPNetworks
	case *v3.HostEndpoint:
		if f.isEndpoint(Host, "", o.Name) {
			return true
		}
		nets = o.Spec.ExpectedIPs
	case *v3.NetworkSet:
		nets = o.Spec.Nets
	case *v3.GlobalNetworkSet:
		nets = o.Spec.Nets
	case *v3.NetworkPolicy:
		return slices.ContainsFunc(f.Endpoints, func(r EndpointRef) bool {
			return r.Kind == Workload && len(r.Key) > len(o.Namespace) && r.Key[len(o.Namespace)] == '/' && strings.HasPrefix(r.Key, o.Namespace)
		})
	default:
		return true
	}
	return f.holdsAddr(nets)
}

// isEndpoint reports whether the endpoint of kind, namespace and name is
// a focus endpoint.
func (f Focus) isEndpoint(kind EndpointKind, namespace, name string) bool {
	for _, r := range f.Endpoints {
		k := r.Key
		switch {
		case r.Kind != kind:
		case namespace == "":
			if k == name {
				return true
			}
		case len(k) == len(namespace)+1+len(name) && k[len(namespace)] == '/' &&
			strings.HasPrefix(k, namespace) && strings.HasSuffix(k, name):
			return true
		}
	}
	return false
}

// holdsAddr reports whether one of nets (as parseNets reads them) holds
// a focus address; nets that do not parse count as holding one, so that
// the item is loaded and its problem reported.
func (f Focus) holdsAddr(nets []string) bool {
	for _, s := range nets {
		var p netip.Prefix
		var err error
		if strings.Contains(s, "/") {
			p, err = netip.ParsePrefix(s)
		} else {
			var a netip.Addr
			a, err = netip.ParseAddr(s)
			p = netip.PrefixFrom(a, a.BitLen())
		}
		if err != nil {
			return true
		}
		p = p.Masked()
		if slices.ContainsFunc(f.Addrs, p.Contains) {
			return true
		}
	}
	return false
}

// IPPortMember is the hash:ip,port ipset member of a named-port set for
// address a, IP protocol proto and port: how the sets' members are
// written, for a reader that looks one up.
func IPPortMember(a netip.Addr, proto uint8, port uint16) string {
	return a.String() + "," + protoName(proto) + ":" + strconv.FormatUint(uint64(port), 10)
}
