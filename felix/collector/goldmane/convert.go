package goldmane

import (
	"strings"

	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/goldmane/proto"
)

// ToProto is a flow as Goldmane's Flow. Tabby's collector counts both
// directions of a connection together: they are sent as "in" for a flow
// reported by the destination and "out" for the source. Endpoint names
// are the pods' own (not aggregated by generateName), and an end of tier
// carries no trigger (the collector does not know which policy of the
// tier selected the endpoint).
func ToProto(f *collector.Flow) *proto.Flow {
	p := &proto.Flow{
		Key: &proto.FlowKey{
			SourceName: f.Source.Name, SourceNamespace: f.Source.Namespace, SourceType: endpointType(f.Source.Kind),
			DestName: f.Dest.Name, DestNamespace: f.Dest.Namespace, DestType: endpointType(f.Dest.Kind),
			DestPort: int64(f.DestPort), Proto: f.Proto, Reporter: reporter(f.Reporter), Action: action(f.Action),
			Policies: &proto.PolicyTrace{EnforcedPolicies: hits(f.Enforced), PendingPolicies: hits(f.Pending)},
		},
		StartTime: f.StartTime.Unix(), EndTime: f.EndTime.Unix(),
		NumConnectionsStarted:   int64(f.ConnectionsStarted),
		NumConnectionsCompleted: int64(f.ConnectionsCompleted),
		NumConnectionsLive:      int64(f.ConnectionsLive),
	}
	if p.Key.Reporter == proto.Reporter_Src {
		p.PacketsOut, p.BytesOut = int64(f.Packets), int64(f.Bytes)
	} else {
		p.PacketsIn, p.BytesIn = int64(f.Packets), int64(f.Bytes)
	}
	return p
}

func endpointType(kind string) proto.EndpointType {
	switch kind {
	case "wep":
		return proto.EndpointType_WorkloadEndpoint
	case "hep":
		return proto.EndpointType_HostEndpoint
	case "ns", "gns":
		return proto.EndpointType_NetworkSet
	case "net":
		return proto.EndpointType_Network
	}
	return proto.EndpointType_EndpointTypeUnspecified
}

func reporter(r string) proto.Reporter {
	switch strings.ToLower(r) {
	case "src":
		return proto.Reporter_Src
	case "dst":
		return proto.Reporter_Dst
	}
	return proto.Reporter_ReporterUnspecified
}

func action(a string) proto.Action {
	switch strings.ToLower(a) {
	case "allow":
		return proto.Action_Allow
	case "deny":
		return proto.Action_Deny
	case "pass":
		return proto.Action_Pass
	}
	return proto.Action_ActionUnspecified
}

// kind is a flow log kind as Goldmane's PolicyKind.
func kind(k string) proto.PolicyKind {
	switch k {
	case "gnp":
		return proto.PolicyKind_GlobalNetworkPolicy
	case "np":
		return proto.PolicyKind_CalicoNetworkPolicy
	case "knp":
		return proto.PolicyKind_NetworkPolicy
	case "kcnp":
		return proto.PolicyKind_ClusterNetworkPolicy
	case "snp":
		return proto.PolicyKind_StagedNetworkPolicy
	case "sgnp":
		return proto.PolicyKind_StagedGlobalNetworkPolicy
	case "sknp":
		return proto.PolicyKind_StagedKubernetesNetworkPolicy
	case "pro":
		return proto.PolicyKind_Profile
	case "eot":
		return proto.PolicyKind_EndOfTier
	}
	return proto.PolicyKind_KindUnspecified
}

func hits(hs []collector.PolicyHit) []*proto.PolicyHit {
	out := make([]*proto.PolicyHit, 0, len(hs))
	for _, h := range hs {
		out = append(out, &proto.PolicyHit{Kind: kind(h.Kind), Namespace: h.Namespace, Name: h.Name, Tier: h.Tier,
			Action: action(h.Action), PolicyIndex: int64(h.Index), RuleIndex: int64(h.RuleIndex)})
	}
	return out
}
