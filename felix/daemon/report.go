package daemon

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// The endpoint report is felix's account of what it has programmed, as a
// read model (served as JSON on the health port, EndpointReportPath):
// for each local endpoint, in evaluation order, the tiers and policies
// and the profiles that apply to it, each with its iptables chain and
// that chain's rule hashes (the "cali:<hash>" comment of every rule,
// which covers the chain's name, the previous rule and the rule's text)
// as the kernel holds them; and the resources the programmed state was
// computed from (all but WorkloadEndpoints), with the version felix read
// of each.
//
// It is what the dataplane applied, not what the calculation wants: the
// daemon hands the reporter each ruleset generation's endpoints and
// resource versions before the dataplane gets the rulesets (Desired), and
// the dataplane, right after an apply, the generation now in the kernel
// and a view of its chains (Applied). The report then pairs the newest
// generation applied with the chains' state read at that moment: a chain
// the kernel holds otherwise than rendered (not yet written, failed and
// replaced by a drop-all chain, failing closed on a missing ipset) shows
// programmed false.
//
// So a policy written at resourceVersion V is enforced on a node once
// that node's report lists it at V (or later) and, on each endpoint it
// applies to, with its chain programmed: a policy that selects no local
// endpoint is listed in Resources only. Likewise for a HostEndpoint, a
// network set, a tier or a profile written.

// EndpointReportPath is where felix serves its endpoint report.
const EndpointReportPath = "/debug/endpoints"

// Report is felix's endpoint report (see above). Lists are sorted.
type Report struct {
	Node string `json:"node"`
	// Generation is the ruleset generation in the kernel (0: none yet).
	Generation uint64 `json:"generation"`
	// Endpoints are the local endpoints, by kind and key.
	Endpoints []EndpointReport `json:"endpoints"`
	// Resources are the resources the programmed generation was
	// computed from (policies, tiers, profiles, host endpoints, network
	// sets: every kind of the calculation's but WorkloadEndpoints, which
	// are many; the local ones are the Endpoints), each at the
	// resourceVersion felix read.
	Resources []ReadVersion `json:"resources"`
}

// EndpointReport is one local endpoint as programmed.
type EndpointReport struct {
	// Kind is "wep" (workload) or "hep" (host endpoint).
	Kind string `json:"kind"`
	// Key is "<namespace>/<name>" of a WorkloadEndpoint, the name of a
	// HostEndpoint.
	Key       string `json:"key"`
	Interface string `json:"interface"`
	// Chains are the endpoint's own chains (cali-tw-/cali-fw-<iface>,
	// cali-fh-/cali-th-... for a host endpoint).
	Chains []ChainReport `json:"chains"`
	// The policies of each direction: Ingress and Egress for every
	// endpoint; the others only for a host endpoint (applyOnForward,
	// preDNAT, doNotTrack).
	Ingress          []TierReport `json:"ingress,omitempty"`
	Egress           []TierReport `json:"egress,omitempty"`
	ForwardIngress   []TierReport `json:"forwardIngress,omitempty"`
	ForwardEgress    []TierReport `json:"forwardEgress,omitempty"`
	PreDNATIngress   []TierReport `json:"preDNATIngress,omitempty"`
	UntrackedIngress []TierReport `json:"untrackedIngress,omitempty"`
	UntrackedEgress  []TierReport `json:"untrackedEgress,omitempty"`
	// Profiles apply when no tier decided, in the endpoint's order.
	Profiles []ProfileReport `json:"profiles,omitempty"`
}

// TierReport is one tier's policies for an endpoint in one direction, in
// evaluation order.
type TierReport struct {
	Tier          string         `json:"tier"`
	DefaultAction string         `json:"defaultAction"`
	Policies      []PolicyReport `json:"policies"`
}

// PolicyReport is one policy applied to an endpoint in one direction.
type PolicyReport struct {
	// Namespace is empty for a GlobalNetworkPolicy.
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	ChainReport
}

// ProfileReport is one profile of an endpoint.
type ProfileReport struct {
	Name    string      `json:"name"`
	Ingress ChainReport `json:"ingress"`
	Egress  ChainReport `json:"egress"`
}

// ChainReport is one iptables chain as the kernel holds it.
type ChainReport struct {
	Table string `json:"table"`
	Chain string `json:"chain"`
	// RuleHashes are the chain's rule hashes in the kernel, in order.
	RuleHashes []string `json:"ruleHashes"`
	// Programmed: the kernel holds exactly the rules felix rendered.
	Programmed bool `json:"programmed"`
}

// ReadVersion is a resource felix read, at the version it read.
type ReadVersion struct {
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	ResourceVersion string `json:"resourceVersion"`
}

// ProgrammedChain tells what the kernel holds of one chain: its rule
// hashes and whether they are exactly the ones rendered (see
// dataplane.Config.OnProgrammed).
type ProgrammedChain = func(table, chain string) (hashes []string, programmed bool)

// reportGen is what one ruleset generation holds: its endpoints (chains
// not yet read) and the resource versions it was computed from (shared,
// never modified).
type reportGen struct {
	endpoints []EndpointReport
	resources map[datastore.Key]string
}

// Reporter keeps the endpoint report. Desired is called by the daemon,
// Applied by the dataplane's loop, ServeHTTP and Report by anyone.
type Reporter struct {
	node string

	mu      sync.Mutex
	pending map[uint64]reportGen // desired generations not yet applied
	applied uint64
	current reportGen // the newest applied, chains read
}

// NewReporter returns an empty report for node.
func NewReporter(node string) *Reporter {
	return &Reporter{node: node, pending: map[uint64]reportGen{}}
}

// maxPendingReports bounds the generations kept for a dataplane that
// does not apply (failing): past it the oldest go, and an apply of one of
// them reports the newest older one kept, or the current one (behind,
// never ahead of what is programmed).
const maxPendingReports = 64

// desired records generation gen's content, before the dataplane has it.
func (r *Reporter) desired(gen uint64, g reportGen) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending[gen] = g
	if len(r.pending) > maxPendingReports {
		delete(r.pending, slices.Min(slices.Collect(maps.Keys(r.pending))))
	}
}

// resourcesRead records resource versions read by a computation that
// changed no rules: they belong to generation gen, the one the dataplane already
// has (current at once when applied, else when gen is).
func (r *Reporter) resourcesRead(gen uint64, resources map[datastore.Key]string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if g, ok := r.pending[gen]; ok && gen > r.applied {
		g.resources = resources
		r.pending[gen] = g
		return
	}
	r.current.resources = resources
}

// Applied takes the generation the dataplane has just applied and reads
// the chains of the newest generation at or below it from chain (which is
// valid during the call only).
func (r *Reporter) Applied(gen uint64, chain ProgrammedChain) {
	r.mu.Lock()
	defer r.mu.Unlock()
	best, found := uint64(0), false
	for g := range r.pending {
		if g <= gen && (!found || g > best) {
			best, found = g, true
		}
	}
	next := r.current
	if found {
		next = r.pending[best]
		for g := range r.pending {
			if g <= gen {
				delete(r.pending, g)
			}
		}
	}
	eps := make([]EndpointReport, len(next.endpoints))
	for i, ep := range next.endpoints {
		eps[i] = readChains(ep, chain)
	}
	next.endpoints = eps
	r.current = next
	r.applied = max(r.applied, gen)
}

// Report is the report now.
func (r *Reporter) Report() Report {
	r.mu.Lock()
	cur, gen := r.current, r.applied
	r.mu.Unlock()
	rep := Report{Node: r.node, Generation: gen, Endpoints: cur.endpoints, Resources: []ReadVersion{}}
	if rep.Endpoints == nil {
		rep.Endpoints = []EndpointReport{}
	}
	for _, k := range slices.SortedFunc(maps.Keys(cur.resources), compareKeys) {
		rep.Resources = append(rep.Resources, ReadVersion{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name, ResourceVersion: cur.resources[k]})
	}
	return rep
}

func compareKeys(a, b datastore.Key) int {
	return strings.Compare(a.Kind+"/"+a.Namespace+"/"+a.Name, b.Kind+"/"+b.Namespace+"/"+b.Name)
}

// ServeHTTP serves the report as JSON.
func (r *Reporter) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(r.Report())
}

// readChains fills ep's chains from the kernel's view.
func readChains(ep EndpointReport, chain ProgrammedChain) EndpointReport {
	fill := func(c *ChainReport) {
		c.RuleHashes, c.Programmed = chain(c.Table, c.Chain)
		if c.RuleHashes == nil {
			c.RuleHashes = []string{}
		}
	}
	ep.Chains = slices.Clone(ep.Chains)
	for i := range ep.Chains {
		fill(&ep.Chains[i])
	}
	for _, dir := range []*[]TierReport{&ep.Ingress, &ep.Egress, &ep.ForwardIngress, &ep.ForwardEgress,
		&ep.PreDNATIngress, &ep.UntrackedIngress, &ep.UntrackedEgress} {
		tiers := slices.Clone(*dir)
		for i := range tiers {
			tiers[i].Policies = slices.Clone(tiers[i].Policies)
			for j := range tiers[i].Policies {
				fill(&tiers[i].Policies[j].ChainReport)
			}
		}
		*dir = tiers
	}
	ep.Profiles = slices.Clone(ep.Profiles)
	for i := range ep.Profiles {
		fill(&ep.Profiles[i].Ingress)
		fill(&ep.Profiles[i].Egress)
	}
	return ep
}

// endpointReport is what the calculation says of one local endpoint,
// with the chains felix renders it into (their state not yet read).
func endpointReport(ep *calc.Endpoint) EndpointReport {
	out := EndpointReport{Kind: string(ep.Kind), Key: ep.Key, Interface: ep.Interface}
	chain := func(table, name string) ChainReport { return ChainReport{Table: table, Chain: name} }
	if ep.Kind == calc.Workload {
		out.Chains = []ChainReport{chain("filter", rules.PrefixToWorkload+ep.Interface), chain("filter", rules.PrefixFromWorkload+ep.Interface)}
	} else {
		suffix := ep.Interface
		if suffix == "*" {
			suffix = rules.AllInterfaces
		}
		for _, p := range []string{rules.PrefixFromHostEp, rules.PrefixToHostEp, rules.PrefixFromHostEpFwd, rules.PrefixToHostEpFwd} {
			out.Chains = append(out.Chains, chain("filter", p+suffix))
		}
	}
	tiers := func(table, prefix string, ts []calc.TierPolicies) []TierReport {
		var res []TierReport
		for _, t := range ts {
			tr := TierReport{Tier: t.Tier, DefaultAction: string(t.DefaultAction)}
			for _, id := range t.Policies {
				tr.Policies = append(tr.Policies, PolicyReport{Namespace: id.Namespace, Name: id.Name,
					ChainReport: chain(table, rules.PolicyChainName(prefix, id))})
			}
			res = append(res, tr)
		}
		return res
	}
	out.Ingress = tiers("filter", rules.PrefixPolicyIn, ep.Ingress)
	out.Egress = tiers("filter", rules.PrefixPolicyOut, ep.Egress)
	out.ForwardIngress = tiers("filter", rules.PrefixPolicyIn, ep.ForwardIngress)
	out.ForwardEgress = tiers("filter", rules.PrefixPolicyOut, ep.ForwardEgress)
	out.PreDNATIngress = tiers("mangle", rules.PrefixPolicyIn, ep.PreDNATIngress)
	out.UntrackedIngress = tiers("raw", rules.PrefixPolicyIn, ep.UntrackedIngress)
	out.UntrackedEgress = tiers("raw", rules.PrefixPolicyOut, ep.UntrackedEgress)
	for _, p := range ep.Profiles {
		out.Profiles = append(out.Profiles, ProfileReport{Name: p,
			Ingress: chain("filter", rules.ProfileChainName(rules.PrefixProfileIn, p)),
			Egress:  chain("filter", rules.ProfileChainName(rules.PrefixProfileOut, p))})
	}
	return out
}

// reportState is the daemon's side of the report: the resource versions
// it has read (copied on write once handed out) and the endpoints' reports
// by key (rebuilt only for the endpoints a computation changed).
type reportState struct {
	resources map[datastore.Key]string
	shared    bool // resources was handed out: copy before writing
	changed   bool // resources changed since last handed out
	eps       map[calc.EndpointRef]EndpointReport
}

// noteResource records the version of a resource read (or its deletion);
// WorkloadEndpoints are left out.
func (s *reportState) noteResource(k datastore.Key, c pendingChange) {
	if k.Kind == v3.KindWorkloadEndpoint {
		return
	}
	if s.shared || s.resources == nil {
		s.resources, s.shared = maps.Clone(s.resources), false
		if s.resources == nil {
			s.resources = map[datastore.Key]string{}
		}
	}
	key := datastore.Key{Kind: k.Kind, Namespace: k.Namespace, Name: k.Name}
	if c.deleted || c.obj == nil {
		delete(s.resources, key)
	} else {
		s.resources[key] = c.obj.GetResourceVersion()
	}
	s.changed = true
}

// generation is what a computation hands the reporter: every local
// endpoint's report (those in delta rebuilt) and the resource versions.
func (s *reportState) generation(res *calc.Result, delta *calc.Delta) reportGen {
	if s.eps == nil {
		s.eps = map[calc.EndpointRef]EndpointReport{}
	}
	for _, ref := range delta.Endpoints {
		delete(s.eps, ref)
	}
	g := reportGen{endpoints: make([]EndpointReport, 0, len(res.Endpoints)), resources: s.handOut()}
	for i := range res.Endpoints {
		ep := &res.Endpoints[i]
		ref := calc.EndpointRef{Kind: ep.Kind, Key: ep.Key}
		rep, ok := s.eps[ref]
		if !ok {
			rep = endpointReport(ep)
			s.eps[ref] = rep
		}
		g.endpoints = append(g.endpoints, rep)
	}
	if len(s.eps) > len(res.Endpoints) {
		keep := map[calc.EndpointRef]bool{}
		for _, ep := range res.Endpoints {
			keep[calc.EndpointRef{Kind: ep.Kind, Key: ep.Key}] = true
		}
		maps.DeleteFunc(s.eps, func(ref calc.EndpointRef, _ EndpointReport) bool { return !keep[ref] })
	}
	return g
}

// handOut is the resource versions to hand to the reporter (shared from
// now on).
func (s *reportState) handOut() map[datastore.Key]string {
	s.shared, s.changed = true, false
	return s.resources
}
