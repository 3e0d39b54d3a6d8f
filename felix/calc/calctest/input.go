package calctest

import (
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
)

// Input sorts resources of any supported kind into a calc.Input for node.
func Input(node string, objs []any) calc.Input {
	in := calc.Input{Node: node}
	for _, o := range objs {
		switch o := o.(type) {
		case *v3.WorkloadEndpoint:
			in.WorkloadEndpoints = append(in.WorkloadEndpoints, o)
		case *v3.HostEndpoint:
			in.HostEndpoints = append(in.HostEndpoints, o)
		case *v3.NetworkPolicy:
			in.NetworkPolicies = append(in.NetworkPolicies, o)
		case *v3.GlobalNetworkPolicy:
			in.GlobalNetworkPolicies = append(in.GlobalNetworkPolicies, o)
		case *v3.Tier:
			in.Tiers = append(in.Tiers, o)
		case *v3.Profile:
			in.Profiles = append(in.Profiles, o)
		case *v3.NetworkSet:
			in.NetworkSets = append(in.NetworkSets, o)
		case *v3.GlobalNetworkSet:
			in.GlobalNetworkSets = append(in.GlobalNetworkSets, o)
		default:
			panic(fmt.Sprintf("calctest.Input: unsupported %T", o))
		}
	}
	return in
}
