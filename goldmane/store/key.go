package store

import (
	"crypto/sha256"
	"strconv"
	"strings"

	"github.com/tabbynet/tabby/goldmane/proto"
)

// Key is a FlowKey in comparable form: the policy trace as Calico's
// label strings ("<index>|<tier>|<kind>:[<ns>/]<name>|<action>|<rule>")
// joined, enforced then pending.
type Key struct {
	SourceName, SourceNamespace    string
	SourceType                     proto.EndpointType
	DestName, DestNamespace        string
	DestType                       proto.EndpointType
	DestPort                       int64
	DestServiceName, DestServiceNS string
	DestServicePortName            string
	DestServicePort                int64
	Proto                          string
	Reporter                       proto.Reporter
	Action                         proto.Action
	Enforced, Pending              string
}

// KeyOf reads a FlowKey.
func KeyOf(k *proto.FlowKey) Key {
	out := Key{
		SourceName: k.SourceName, SourceNamespace: k.SourceNamespace, SourceType: k.SourceType,
		DestName: k.DestName, DestNamespace: k.DestNamespace, DestType: k.DestType, DestPort: k.DestPort,
		DestServiceName: k.DestServiceName, DestServiceNS: k.DestServiceNamespace,
		DestServicePortName: k.DestServicePortName, DestServicePort: k.DestServicePort,
		Proto: k.Proto, Reporter: k.Reporter, Action: k.Action,
	}
	if p := k.Policies; p != nil {
		out.Enforced, out.Pending = hitsLabel(p.EnforcedPolicies), hitsLabel(p.PendingPolicies)
	}
	return out
}

func hitsLabel(hits []*proto.PolicyHit) string {
	var b strings.Builder
	for i, h := range hits {
		if i > 0 {
			b.WriteByte(';')
		}
		b.WriteString(HitLabel(h))
	}
	return b.String()
}

// ShortKind is Calico's short name of a policy kind in flow log labels.
func ShortKind(k proto.PolicyKind) string {
	switch k {
	case proto.PolicyKind_GlobalNetworkPolicy:
		return "gnp"
	case proto.PolicyKind_CalicoNetworkPolicy:
		return "np"
	case proto.PolicyKind_NetworkPolicy:
		return "knp"
	case proto.PolicyKind_StagedNetworkPolicy:
		return "snp"
	case proto.PolicyKind_StagedGlobalNetworkPolicy:
		return "sgnp"
	case proto.PolicyKind_StagedKubernetesNetworkPolicy:
		return "sknp"
	case proto.PolicyKind_ClusterNetworkPolicy:
		return "kcnp"
	case proto.PolicyKind_Profile:
		return "pro"
	case proto.PolicyKind_EndOfTier:
		return "eot"
	}
	return "unknown"
}

// HitLabel is Calico's flow log label of a hit: an end of tier is named
// by its trigger, profiles are in tier __PROFILE__.
func HitLabel(h *proto.PolicyHit) string {
	named := h
	if h.Kind == proto.PolicyKind_EndOfTier && h.Trigger != nil {
		named = h.Trigger
	}
	name := ShortKind(named.Kind) + ":" + named.Name
	if named.Namespace != "" {
		name = ShortKind(named.Kind) + ":" + named.Namespace + "/" + named.Name
	}
	tier := h.Tier
	if h.Kind == proto.PolicyKind_Profile {
		tier = "__PROFILE__"
	}
	return strconv.FormatInt(h.PolicyIndex, 10) + "|" + tier + "|" + name + "|" +
		strings.ToLower(h.Action.String()) + "|" + strconv.FormatInt(h.RuleIndex, 10)
}

func sha256Sum(b []byte) [32]byte { return sha256.Sum256(b) }
