package collector

import (
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/felix/staged"
)

// Pending verdicts, as Calico's collector works them out (its
// FlowLogsPolicyEvaluationMode Continuous): staged policies are never
// programmed, so no packet is logged by them; instead, for a flow whose
// reporting end is a workload of this node (the destination for an
// ingress report, the source for an egress one), the collector evaluates
// that workload's policy with the staged policies as if enforced (each
// staged policy a policy of its own in its tier, see calc/staged.go) and
// the flow carries that path as its pending policies. The evaluation is
// felix's own: calc.ComputeFocused over the objects the flow needs and
// rules.TraceChain through the workload's chain as felix would render
// it. As in Calico, host endpoints' reports carry no pending policies.

// policyInputs are the objects the pending evaluation reads, by key:
// endpoints (workloads trimmed to what the calculation reads, host
// endpoints), NetworkPolicies by namespace, and the objects every
// evaluation reads (global policies, tiers, profiles, network sets,
// staged policies converted).
type policyInputs struct {
	endpoints map[datastore.Key]any
	nsPols    map[string]map[datastore.Key]any
	shared    map[datastore.Key]any
	// services: felix follows Kubernetes Services (Lookups.FollowServices),
	// so services matches select their EndpointSlices' endpoints as in
	// felix's own calculation; without it they fail closed, as in felix.
	services bool
}

func newPolicyInputs() policyInputs {
	return policyInputs{endpoints: map[datastore.Key]any{}, nsPols: map[string]map[datastore.Key]any{}, shared: map[datastore.Key]any{}}
}

// update takes one datastore update (the caller holds the lock). A staged
// policy that does not convert is left out of the evaluation, as felix
// leaves out what does not validate.
func (p *policyInputs) update(u datastore.Update) {
	delete(p.endpoints, u.Key)
	delete(p.nsPols[u.Key.Namespace], u.Key)
	delete(p.shared, u.Key)
	if u.Type == datastore.EventDeleted || u.Object == nil {
		return
	}
	switch r := u.Object.(type) {
	case *v3.WorkloadEndpoint:
		p.endpoints[u.Key] = trimWorkload(r)
	case *v3.HostEndpoint:
		p.endpoints[u.Key] = r
	case *v3.NetworkPolicy:
		if p.nsPols[r.Namespace] == nil {
			p.nsPols[r.Namespace] = map[datastore.Key]any{}
		}
		p.nsPols[r.Namespace][u.Key] = r
	case *v3.StagedNetworkPolicy, *v3.StagedGlobalNetworkPolicy, *v3.StagedKubernetesNetworkPolicy:
		if sp, err := staged.Convert(r); err == nil && sp != nil {
			p.shared[u.Key] = sp
		}
	case *v3.GlobalNetworkPolicy, *v3.Tier, *v3.Profile, *v3.NetworkSet, *v3.GlobalNetworkSet, *v3.KubernetesEndpointSlice:
		p.shared[u.Key] = r
	}
}

// input is what evaluating ep's policy for a flow needs: ep, the
// endpoints holding the flow's addresses (holders), the NetworkPolicies
// of ep's namespace and the shared objects (with the EndpointSlices
// where felix follows Services).
func (p *policyInputs) input(node string, ep datastore.Key, holders []datastore.Key) calc.Input {
	in := calc.Input{Node: node, FollowsServices: p.services}
	in.Add(p.endpoints[ep])
	for _, k := range holders {
		if o, ok := p.endpoints[k]; ok && k != ep {
			in.Add(o)
		}
	}
	for _, o := range p.nsPols[ep.Namespace] {
		in.Add(o)
	}
	for _, o := range p.shared {
		in.Add(o)
	}
	return in
}

// localWorkload reports whether holder is a workload endpoint of node.
func (p *policyInputs) localWorkload(node string, holder datastore.Key) bool {
	w, ok := p.endpoints[holder].(*v3.WorkloadEndpoint)
	return ok && w.Spec.Node == node
}

// trimWorkload keeps of a workload endpoint what the calculation reads.
func trimWorkload(w *v3.WorkloadEndpoint) *v3.WorkloadEndpoint {
	return &v3.WorkloadEndpoint{TypeMeta: w.TypeMeta, Spec: w.Spec, ObjectMeta: metaOf(w)}
}

func metaOf(w *v3.WorkloadEndpoint) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: w.Name, Namespace: w.Namespace, Labels: w.Labels, ResourceVersion: w.ResourceVersion}
}

// evaluate is the pending path of a flow at workload ep of node (ingress:
// its ingress policy) over in (see input). It returns false when felix
// would not program ep.
func evaluate(in calc.Input, ep datastore.Key, ingress bool, t Tuple) ([]PolicyHit, bool) {
	ref := calc.EndpointRef{Kind: calc.Workload, Key: ep.Namespace + "/" + ep.Name}
	res := calc.ComputeFocused(in, calc.Focus{Endpoints: []calc.EndpointRef{ref}, Addrs: []netip.Addr{t.Src, t.Dst}})
	for i := range res.Endpoints {
		e := &res.Endpoints[i]
		if e.Kind != calc.Workload || e.Key != ref.Key {
			continue
		}
		tiers := e.Egress
		if ingress {
			tiers = e.Ingress
		}
		ct := rules.TraceChain(res, rules.TraceChainInput{Kind: rules.TraceNormal, Ingress: ingress, Tiers: tiers, Profiles: e.Profiles}, packetOf(t))
		return hitsOfTrace(ct), true
	}
	return nil, false
}

// packetOf is a flow's first packet as a trace takes it; an ICMP flow is
// taken as an echo request (the tuple carries no ICMP type).
func packetOf(t Tuple) rules.Packet {
	pkt := rules.Packet{Src: t.Src, Dst: t.Dst, Protocol: t.Proto, SrcPort: t.SrcPort, DstPort: t.DstPort}
	switch t.Proto {
	case 1:
		pkt.ICMPType = 8
	case 58:
		pkt.ICMPType = 128
	}
	return pkt
}

// hitsOfTrace is a chain trace as policy hits: each policy verdict (Pass
// included), each tier's end that acted (Deny, or Pass as Calico's
// pending trace names it), the profile that decided or the drop when
// none did.
func hitsOfTrace(ct rules.ChainTrace) []PolicyHit {
	var out []PolicyHit
	add := func(h PolicyHit) {
		h.Index = len(out)
		out = append(out, h)
	}
	decided := false
	for _, tt := range ct.Tiers {
		for _, pt := range tt.Policies {
			if pt.Action == "" {
				continue
			}
			kind, ns, name := policyKind(pt.Policy)
			add(PolicyHit{Kind: kind, Tier: tt.Tier, Namespace: ns, Name: name, Action: string(pt.Action), RuleIndex: pt.Rule})
			decided = decided || pt.Action != v3.Pass
		}
		if tt.EndOfTier != "" {
			add(PolicyHit{Kind: "eot", Tier: tt.Tier, Action: string(tt.EndOfTier), RuleIndex: -1})
			decided = decided || tt.EndOfTier == v3.Deny
		}
	}
	for _, pr := range ct.Profiles {
		if pr.Action == v3.Allow || pr.Action == v3.Deny {
			add(PolicyHit{Kind: "pro", Tier: ProfileTier, Name: pr.Profile, Action: string(pr.Action), RuleIndex: pr.Rule})
			decided = true
		}
	}
	if !decided && ct.Verdict == v3.Deny {
		add(PolicyHit{Kind: "pro", Tier: ProfileTier, Action: "Deny", RuleIndex: -1}) // no profile accepted
	}
	return out
}

// policyKind is a policy's kind as flow logs name it (Calico's short
// kinds: np, gnp, knp and, staged, snp, sgnp, sknp), its namespace and
// its name as written.
func policyKind(id calc.PolicyID) (kind, ns, name string) {
	if calc.IsStaged(id) {
		k, n := calc.StagedKind(id)
		switch k {
		case v3.KindStagedGlobalNetworkPolicy:
			return "sgnp", "", n
		case v3.KindStagedKubernetesNetworkPolicy:
			return "sknp", id.Namespace, n
		}
		return "snp", id.Namespace, n
	}
	if id.Namespace == "" {
		return "gnp", "", id.Name
	}
	if n, ok := strings.CutPrefix(id.Name, rules.KubernetesPolicyPrefix); ok {
		return "knp", id.Namespace, n
	}
	return "np", id.Namespace, id.Name
}
