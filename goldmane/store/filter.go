package store

import (
	"slices"
	"strings"

	"github.com/tabbynet/tabby/goldmane/proto"
)

// Match says whether a flow key passes the filter as Calico's Goldmane
// reads it: each repeated field ORs its values, the fields AND; a policy
// match holds when any enforced or pending hit matches; pending actions
// when any pending hit has one of them. A nil filter matches all.
func Match(f *proto.Filter, k *proto.FlowKey) bool {
	if f == nil {
		return true
	}
	return matchStrings(f.SourceNames, k.SourceName) &&
		matchStrings(f.SourceNamespaces, k.SourceNamespace) &&
		matchStrings(f.DestNames, k.DestName) &&
		matchStrings(f.DestNamespaces, k.DestNamespace) &&
		matchStrings(f.Protocols, k.Proto) &&
		matchPorts(f.DestPorts, k.DestPort) &&
		(len(f.Actions) == 0 || slices.Contains(f.Actions, k.Action)) &&
		(f.Reporter == proto.Reporter_ReporterUnspecified || f.Reporter == k.Reporter) &&
		matchPending(f.PendingActions, k.Policies) &&
		matchPolicies(f.Policies, k.Policies)
}

func matchStrings(ms []*proto.StringMatch, v string) bool {
	if len(ms) == 0 {
		return true
	}
	return slices.ContainsFunc(ms, func(m *proto.StringMatch) bool { return StringMatches(m, v) })
}

// StringMatches: Exact compares, Fuzzy looks for a substring; a nil or
// empty match matches anything.
func StringMatches(m *proto.StringMatch, v string) bool {
	if m == nil || m.Value == "" {
		return true
	}
	if m.Type == proto.MatchType_Exact {
		return v == m.Value
	}
	return strings.Contains(v, m.Value)
}

func matchPorts(ps []*proto.PortMatch, port int64) bool {
	return len(ps) == 0 || slices.ContainsFunc(ps, func(p *proto.PortMatch) bool { return p.Port == port })
}

func matchPending(actions []proto.Action, t *proto.PolicyTrace) bool {
	if len(actions) == 0 {
		return true
	}
	return t != nil && slices.ContainsFunc(t.PendingPolicies, func(h *proto.PolicyHit) bool {
		return slices.Contains(actions, h.Action)
	})
}

func matchPolicies(ms []*proto.PolicyMatch, t *proto.PolicyTrace) bool {
	if len(ms) == 0 {
		return true
	}
	if t == nil {
		return false
	}
	hit := func(h *proto.PolicyHit) bool {
		return slices.ContainsFunc(ms, func(m *proto.PolicyMatch) bool { return policyMatches(m, h) })
	}
	return slices.ContainsFunc(t.EnforcedPolicies, hit) || slices.ContainsFunc(t.PendingPolicies, hit)
}

func policyMatches(m *proto.PolicyMatch, h *proto.PolicyHit) bool {
	return (m.Kind == proto.PolicyKind_KindUnspecified || m.Kind == h.Kind) &&
		StringMatches(m.Tier, h.Tier) && StringMatches(m.Namespace, h.Namespace) &&
		StringMatches(m.Name, h.Name) &&
		(m.Action == proto.Action_ActionUnspecified || m.Action == h.Action)
}
