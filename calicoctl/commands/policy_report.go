package commands

import (
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// The report of `policy trace`, as -o yaml|json prints it (field names
// are stable for scripts).

// TraceReport is one trace: the flow, the chains its first packet goes
// through with what each did, and the verdict. PendingVerdict is the
// verdict with the staged policies enforced (only when there are any).
type TraceReport struct {
	From           TracePeer   `json:"from"`
	To             TracePeer   `json:"to"`
	Packet         TracePacket `json:"packet"`
	Hops           []TraceHop  `json:"hops"`
	Verdict        string      `json:"verdict"`
	PendingVerdict string      `json:"pendingVerdict,omitempty"`
	Notes          []string    `json:"notes,omitempty"`
}

// TracePeer is one end of the flow.
type TracePeer struct {
	// Kind is WorkloadEndpoint, HostEndpoint or IP (not in the cluster).
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
	Workload  string `json:"pod,omitempty"`
	Node      string `json:"node,omitempty"`
	IP        string `json:"ip"`
}

// TracePacket is the flow's first packet.
type TracePacket struct {
	Protocol string `json:"protocol"`
	SrcPort  int    `json:"srcPort,omitempty"`
	DstPort  int    `json:"dstPort,omitempty"`
	ICMPType *int   `json:"icmpType,omitempty"`
	ICMPCode *int   `json:"icmpCode,omitempty"`
}

// TraceHop is one endpoint chain (or fixed rule) of the path.
type TraceHop struct {
	Node      string `json:"node"`
	Endpoint  string `json:"endpoint"`
	Direction string `json:"direction"`
	// Stage is policy (the endpoint's normal policy), forward
	// (applyOnForward), preDNAT, doNotTrack, or endpointToHost /
	// hostToWorkload (felix's fixed rules, no policy).
	Stage    string `json:"stage"`
	Chain    string `json:"chain,omitempty"`
	Failsafe bool   `json:"failsafe,omitempty"`
	// Skipped: an earlier doNotTrack or preDNAT allow accepted the
	// packet, so this chain never sees it.
	Skipped  bool           `json:"skipped,omitempty"`
	Tiers    []TraceTier    `json:"tiers,omitempty"`
	Profiles []TraceProfile `json:"profiles,omitempty"`
	// Verdict is Allow, Deny or Continue (the chain decided nothing).
	Verdict string        `json:"verdict"`
	Note    string        `json:"note,omitempty"`
	Pending *TracePending `json:"pending,omitempty"`
}

// TracePending is a hop with the staged policies enforced.
type TracePending struct {
	Skipped  bool           `json:"skipped,omitempty"`
	Tiers    []TraceTier    `json:"tiers,omitempty"`
	Profiles []TraceProfile `json:"profiles,omitempty"`
	Verdict  string         `json:"verdict"`
}

// TraceTier is one tier: the policies the packet reached and, when none
// decided, the end-of-tier action.
type TraceTier struct {
	Name      string        `json:"name"`
	Policies  []TracePolicy `json:"policies"`
	EndOfTier string        `json:"endOfTier,omitempty"`
}

// TracePolicy is one policy the packet reached.
type TracePolicy struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Chain     string `json:"chain"`
	// Match is the first rule that matched (nil: none did).
	Match  *TraceMatch `json:"match,omitempty"`
	Logged []int       `json:"logged,omitempty"`
}

// TraceProfile is one profile the packet reached.
type TraceProfile struct {
	Name   string      `json:"name"`
	Chain  string      `json:"chain"`
	Match  *TraceMatch `json:"match,omitempty"`
	Logged []int       `json:"logged,omitempty"`
}

// TraceMatch is a matching rule: its index in the policy's rules of the
// direction, its action, and the rule as written.
type TraceMatch struct {
	Index  int       `json:"index"`
	Action string    `json:"action"`
	Rule   *v3.Rule  `json:"rule,omitempty"`
	Note   string    `json:"note,omitempty"`
	action v3.Action // for the text output
}

// verdictName is a chain's verdict as the report writes it.
func verdictName(a v3.Action) string {
	if a == "" {
		return "Continue"
	}
	return string(a)
}

// policyIndex finds the objects behind the calculation's names: policies
// by ID (enforced or, in a pending trace, staged) and profiles by name.
type policyIndex struct {
	policies map[calc.PolicyID]v3.Resource
	staged   map[calc.PolicyID]string // the staged kind of a staged policy
	profiles map[string]*v3.Profile
}

func newPolicyIndex(objs []any) *policyIndex {
	x := &policyIndex{policies: map[calc.PolicyID]v3.Resource{}, staged: map[calc.PolicyID]string{}, profiles: map[string]*v3.Profile{}}
	for _, o := range objs {
		switch o := o.(type) {
		case *calc.StagedPolicy:
			id := stagedID(o)
			x.policies[id], x.staged[id] = o.Policy, o.Kind
		case *v3.Profile:
			x.profiles[o.Name] = o
		case v3.Resource:
			if id, ok := policyID(o); ok {
				x.policies[id] = o
			}
		}
	}
	return x
}

// nameOf is a policy's name as written (a staged policy's without the
// calculation's prefix, a staged Kubernetes policy's as in Kubernetes).
func (x *policyIndex) nameOf(id calc.PolicyID) string {
	if calc.IsStaged(id) {
		_, name := calc.StagedKind(id)
		return name
	}
	return id.Name
}

// chainOf is a policy's chain with prefix ("" for a staged policy:
// felix renders none).
func (x *policyIndex) chainOf(prefix string, id calc.PolicyID) string {
	if calc.IsStaged(id) {
		return ""
	}
	return rules.PolicyChainName(prefix, id)
}

// rulesOf is a policy's or profile's rules of one direction, as written.
func rulesOf(r v3.Resource, ingress bool) []v3.Rule {
	var in, out []v3.Rule
	switch p := r.(type) {
	case *v3.NetworkPolicy:
		in, out = p.Spec.Ingress, p.Spec.Egress
	case *v3.GlobalNetworkPolicy:
		in, out = p.Spec.Ingress, p.Spec.Egress
	case *v3.Profile:
		in, out = p.Spec.Ingress, p.Spec.Egress
	}
	if ingress {
		return in
	}
	return out
}

// match is the report of a matching rule (nil for none).
func match(r v3.Resource, ingress bool, index int, action v3.Action) *TraceMatch {
	if index < 0 {
		return nil
	}
	m := &TraceMatch{Index: index, Action: string(action), action: action}
	if rs := rulesOf(r, ingress); r != nil && index < len(rs) {
		rule := rs[index]
		m.Rule = &rule
		if rule.Action != action {
			m.Note = "felix cannot render this rule as written and enforces it as " + string(action) + " (fail closed)"
		}
	}
	return m
}

// tiers converts a chain's tiers for the report.
func (x *policyIndex) tierTraces(ts []rules.TierTrace, ingress bool) []TraceTier {
	prefix := rules.PrefixPolicyOut
	if ingress {
		prefix = rules.PrefixPolicyIn
	}
	var out []TraceTier
	for _, t := range ts {
		tt := TraceTier{Name: t.Tier, EndOfTier: string(t.EndOfTier), Policies: []TracePolicy{}}
		for _, p := range t.Policies {
			obj := x.policies[p.Policy]
			tp := TracePolicy{Kind: x.kindOf(p.Policy), Namespace: p.Policy.Namespace, Name: x.nameOf(p.Policy),
				Chain: x.chainOf(prefix, p.Policy), Match: match(obj, ingress, p.Rule, p.Action), Logged: p.Logged}
			tt.Policies = append(tt.Policies, tp)
		}
		out = append(out, tt)
	}
	return out
}

func (x *policyIndex) kindOf(id calc.PolicyID) string {
	if k, ok := x.staged[id]; ok {
		return k
	}
	if id.Namespace != "" {
		if strings.HasPrefix(id.Name, "knp.default.") {
			return "KubernetesNetworkPolicy"
		}
		return v3.KindNetworkPolicy
	}
	if strings.HasPrefix(id.Name, rules.ClusterPolicyPrefix) {
		return "KubernetesClusterNetworkPolicy"
	}
	return v3.KindGlobalNetworkPolicy
}

func (x *policyIndex) profileTraces(ps []rules.ProfileTrace, ingress bool) []TraceProfile {
	prefix := rules.PrefixProfileOut
	if ingress {
		prefix = rules.PrefixProfileIn
	}
	var out []TraceProfile
	for _, p := range ps {
		var obj v3.Resource
		if prof := x.profiles[p.Profile]; prof != nil {
			obj = prof
		}
		out = append(out, TraceProfile{Name: p.Profile, Chain: rules.ProfileChainName(prefix, p.Profile),
			Match: match(obj, ingress, p.Rule, p.Action), Logged: p.Logged})
	}
	return out
}
