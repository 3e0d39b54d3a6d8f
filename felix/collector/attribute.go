package collector

import (
	"net/netip"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// Whose flow a verdict is, as Calico's collector decides it: a packet's
// verdicts are logged by every chain it goes through (a host endpoint's
// preDNAT and applyOnForward chains, then a workload's), all under the
// packet's own addresses. A flow is reported only at a workload of the
// node: the destination for ingress verdicts, the source for egress
// ones; a flow with a host endpoint of the node at either end is not
// reported at all (Calico's "ignore HEP reporters"), and of the verdicts
// only those of the workload's own policies (and tiers, and profiles)
// are its flow's: a host endpoint's policy that does not also select the
// workload decides no flow. The rule counters count every verdict.

// Attribution is what a flow reported at a workload keeps of a path:
// the policies ("<namespace>/<name>" as stored) and tiers of the
// workload's chain in the flow's direction. All keeps everything (a
// resolver that knows no chains).
type Attribution struct {
	All      bool
	Policies map[string]bool
	Tiers    map[string]bool
}

// Keeps says whether hit is a verdict of the attributed chain.
func (a Attribution) Keeps(h PolicyHit) bool {
	switch {
	case a.All, h.Kind == "pro":
		return true
	case h.Kind == "eot":
		return a.Tiers[h.Tier]
	}
	return a.Policies[storedPolicyName(h)]
}

// storedPolicyName is a hit's policy as "<namespace>/<name>" with the
// name as stored (Kubernetes policies with their prefixes).
func storedPolicyName(h PolicyHit) string {
	name := h.Name
	switch h.Kind {
	case "knp":
		name = rules.KubernetesPolicyPrefix + name
	case "kcnp":
		name = rules.ClusterPolicyPrefix + name
	}
	return h.Namespace + "/" + name
}

// attributed is the part of hits that is the flow's, false when no flow
// is reported for them (no workload of the node reports it, or its own
// chain's verdicts are not among them).
func attributed(hits []PolicyHit, a Attribution) ([]PolicyHit, bool) {
	out := make([]PolicyHit, 0, len(hits))
	for _, h := range hits {
		if a.Keeps(h) {
			h.Index = len(out)
			out = append(out, h)
		}
	}
	if len(out) == 0 || out[len(out)-1].Action == "Pass" {
		return nil, false
	}
	return out, true
}

// attributionKey is a cached attribution: a workload and a direction.
type attributionKey struct {
	ep      datastore.Key
	ingress bool
}

// Reporter implements Resolver: see Attribution. The policies of a
// workload's chain come from felix's calculation (as the pending
// evaluation's), cached until the next datastore update.
func (l *Lookups) Reporter(node string, ingress bool, t Tuple) (Attribution, bool) {
	at := t.Src
	if ingress {
		at = t.Dst
	}
	l.mu.RLock()
	for _, a := range []netip.Addr{t.Src, t.Dst} {
		if k, ok := l.keyByIP[a]; ok && l.inputs.localHost(node, k) {
			l.mu.RUnlock()
			return Attribution{}, false
		}
	}
	ep, ok := l.keyByIP[at]
	if !ok || !l.inputs.localWorkload(node, ep) {
		l.mu.RUnlock()
		return Attribution{}, false
	}
	ck := attributionKey{ep, ingress}
	l.attrMu.Lock()
	a, cached := l.attrs[ck]
	l.attrMu.Unlock()
	if cached {
		l.mu.RUnlock()
		return a, true
	}
	in := l.inputs.input(node, ep, nil)
	gen := l.generation
	l.mu.RUnlock()
	a, ok = chainOf(in, ep, ingress)
	if !ok {
		return Attribution{All: true}, true // felix does not program it: keep what the kernel logged
	}
	l.attrMu.Lock()
	if l.generation == gen {
		l.attrs[ck] = a
	}
	l.attrMu.Unlock()
	return a, true
}

// chainOf is the policies and tiers of workload ep's chain in one
// direction, by felix's calculation over in.
func chainOf(in calc.Input, ep datastore.Key, ingress bool) (Attribution, bool) {
	ref := calc.EndpointRef{Kind: calc.Workload, Key: ep.Namespace + "/" + ep.Name}
	res := calc.ComputeFocused(in, calc.Focus{Endpoints: []calc.EndpointRef{ref}})
	for i := range res.Endpoints {
		e := &res.Endpoints[i]
		if e.Kind != calc.Workload || e.Key != ref.Key {
			continue
		}
		tiers := e.Egress
		if ingress {
			tiers = e.Ingress
		}
		a := Attribution{Policies: map[string]bool{}, Tiers: map[string]bool{}}
		for _, tp := range tiers {
			a.Tiers[tp.Tier] = true
			for _, id := range tp.Policies {
				a.Policies[id.Namespace+"/"+id.Name] = true
			}
		}
		return a, true
	}
	return Attribution{}, false
}

// localHost reports whether holder is a host endpoint of node.
func (p *policyInputs) localHost(node string, holder datastore.Key) bool {
	h, ok := p.endpoints[holder].(*v3.HostEndpoint)
	return ok && h.Spec.Node == node
}
