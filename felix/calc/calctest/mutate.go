package calctest

import (
	"fmt"
	"math/rand/v2"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Churn returns a mixed cluster (a small Synthetic one plus the Scenario)
// for randomised change tests.
func Churn() []any {
	objs := append(Synthetic(40, 12, 60), Scenario()...)
	// The scenario repeats some namespace profiles: keep the first.
	seen := map[string]bool{}
	return slices.DeleteFunc(objs, func(o any) bool {
		p, ok := o.(*v3.Profile)
		if !ok {
			return false
		}
		dup := seen[p.Name]
		seen[p.Name] = true
		return dup
	})
}

// Mutate applies one random change of any kind (policies' rules,
// selectors and order; endpoints added, removed, relabelled, moved between
// nodes; profiles' labels; tiers; network sets; or nothing) to objs,
// replacing changed objects by new ones as a datastore cache does, and
// shuffles the result as a daemon's map would. objs is reused: use the
// returned slice.
func Mutate(rng *rand.Rand, objs []any, step int) []any {
	m := &mutation{rng: rng, objs: objs, step: step}
	mutations[rng.IntN(len(mutations))](m)
	rng.Shuffle(len(m.objs), func(i, j int) { m.objs[i], m.objs[j] = m.objs[j], m.objs[i] })
	return m.objs
}

// mutation is one Mutate call's state.
type mutation struct {
	rng  *rand.Rand
	objs []any
	step int
}

// mutations are the kinds of change Mutate picks from.
var mutations = []func(*mutation){
	(*mutation).policyRules,
	(*mutation).policySelector,
	(*mutation).removePolicy,
	(*mutation).addPolicy,
	(*mutation).relabelEndpoint,
	(*mutation).moveEndpoint,
	(*mutation).addAndRemoveEndpoints,
	(*mutation).profileLabels,
	(*mutation).tierComesOrGoes,
	(*mutation).addNetworkSet,
	(*mutation).hostPolicyFlags,
	func(*mutation) {}, // nothing changed
}

// pick returns the index of a random object of type T, or -1.
func pick[T any](m *mutation) int {
	var idx []int
	for i, o := range m.objs {
		if _, ok := o.(T); ok {
			idx = append(idx, i)
		}
	}
	if len(idx) == 0 {
		return -1
	}
	return idx[m.rng.IntN(len(idx))]
}

func (m *mutation) policyRules() {
	if i := pick[*v3.NetworkPolicy](m); i >= 0 {
		p := m.objs[i].(*v3.NetworkPolicy).DeepCopy()
		p.Spec.Ingress = append(p.Spec.Ingress, v3.Rule{Action: v3.Deny, Protocol: Proto("UDP"), Destination: v3.EntityRule{Ports: Ports(fmt.Sprint(1000 + m.step))}})
		m.objs[i] = p
	}
}

func (m *mutation) policySelector() {
	if i := pick[*v3.NetworkPolicy](m); i >= 0 {
		p := m.objs[i].(*v3.NetworkPolicy).DeepCopy()
		p.Spec.Selector = fmt.Sprintf("app == 'a%d'", m.rng.IntN(12))
		p.Spec.Order = Ptr(float64(m.rng.IntN(5)))
		m.objs[i] = p
	}
}

func (m *mutation) removePolicy() {
	if i := pick[*v3.NetworkPolicy](m); i >= 0 {
		m.objs = slices.Delete(m.objs, i, i+1)
	}
}

func (m *mutation) addPolicy() {
	m.objs = append(m.objs, SyntheticPolicy(100+m.step, m.step%2))
}

// relabelEndpoint relabels an endpoint (local or remote).
func (m *mutation) relabelEndpoint() {
	if i := pick[*v3.WorkloadEndpoint](m); i >= 0 {
		w := m.objs[i].(*v3.WorkloadEndpoint).DeepCopy()
		w.Labels = map[string]string{"app": fmt.Sprintf("a%d", m.rng.IntN(12))}
		m.objs[i] = w
	}
}

// moveEndpoint moves an endpoint to or from this node.
func (m *mutation) moveEndpoint() {
	if i := pick[*v3.WorkloadEndpoint](m); i >= 0 {
		w := m.objs[i].(*v3.WorkloadEndpoint).DeepCopy()
		if w.Spec.Node == Node {
			w.Spec.Node = "elsewhere"
		} else {
			w.Spec.Node = Node
		}
		m.objs[i] = w
	}
}

func (m *mutation) addAndRemoveEndpoints() {
	step := m.step
	m.objs = append(m.objs, WEP("ns1", fmt.Sprintf("new%d", step), Node, fmt.Sprintf("calinew%d", step),
		fmt.Sprintf("10.250.%d.%d", step/200, step%200+1), map[string]string{"app": "a1"}))
	if i := pick[*v3.WorkloadEndpoint](m); i >= 0 {
		m.objs = slices.Delete(m.objs, i, i+1)
	}
}

func (m *mutation) profileLabels() {
	if i := pick[*v3.Profile](m); i >= 0 {
		p := m.objs[i].(*v3.Profile).DeepCopy()
		p.Spec.LabelsToApply = map[string]string{"team": fmt.Sprintf("t%d", m.rng.IntN(5))}
		m.objs[i] = p
	}
}

func (m *mutation) tierComesOrGoes() {
	if i := slices.IndexFunc(m.objs, func(o any) bool { _, ok := o.(*v3.Tier); return ok }); i >= 0 {
		m.objs = slices.Delete(m.objs, i, i+1)
	} else {
		m.objs = append(m.objs, Tier("security", 10, v3.Pass))
	}
}

func (m *mutation) addNetworkSet() {
	m.objs = append(m.objs, NetSet("ns1", fmt.Sprintf("set%d", m.step), map[string]string{"app": "a2"}, fmt.Sprintf("192.0.2.%d/32", m.step%250)))
}

// hostPolicyFlags changes a global policy's host endpoint flags.
func (m *mutation) hostPolicyFlags() {
	i := pick[*v3.GlobalNetworkPolicy](m)
	if i < 0 {
		return
	}
	p := m.objs[i].(*v3.GlobalNetworkPolicy).DeepCopy()
	switch m.rng.IntN(4) {
	case 0:
		HostPolicy(p, false, false, false)
	case 1:
		HostPolicy(p, true, false, false)
	case 2:
		if len(p.Spec.Egress) == 0 && !slices.Contains(p.Spec.Types, v3.PolicyTypeEgress) {
			HostPolicy(p, true, true, false)
		}
	default:
		HostPolicy(p, true, false, true)
	}
	m.objs[i] = p
}
