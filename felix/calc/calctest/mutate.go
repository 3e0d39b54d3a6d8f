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
	find := func(pred func(any) bool) []int {
		var idx []int
		for i, o := range objs {
			if pred(o) {
				idx = append(idx, i)
			}
		}
		return idx
	}
	pick := func(pred func(any) bool) int {
		idx := find(pred)
		if len(idx) == 0 {
			return -1
		}
		return idx[rng.IntN(len(idx))]
	}
	isNP := func(o any) bool { _, ok := o.(*v3.NetworkPolicy); return ok }
	isWEP := func(o any) bool { _, ok := o.(*v3.WorkloadEndpoint); return ok }
	isProf := func(o any) bool { _, ok := o.(*v3.Profile); return ok }
	changes := []func(){
		func() { // a policy's rules
			if i := pick(isNP); i >= 0 {
				p := objs[i].(*v3.NetworkPolicy).DeepCopy()
				p.Spec.Ingress = append(p.Spec.Ingress, v3.Rule{Action: v3.Deny, Protocol: Proto("UDP"), Destination: v3.EntityRule{Ports: Ports(fmt.Sprint(1000 + step))}})
				objs[i] = p
			}
		},
		func() { // a policy's selector and order
			if i := pick(isNP); i >= 0 {
				p := objs[i].(*v3.NetworkPolicy).DeepCopy()
				p.Spec.Selector = fmt.Sprintf("app == 'a%d'", rng.IntN(12))
				p.Spec.Order = Ptr(float64(rng.IntN(5)))
				objs[i] = p
			}
		},
		func() { // remove a policy
			if i := pick(isNP); i >= 0 {
				objs = slices.Delete(objs, i, i+1)
			}
		},
		func() { // add a policy
			objs = append(objs, SyntheticPolicy(100+step, step%2))
		},
		func() { // relabel an endpoint (local or remote)
			if i := pick(isWEP); i >= 0 {
				w := objs[i].(*v3.WorkloadEndpoint).DeepCopy()
				w.Labels = map[string]string{"app": fmt.Sprintf("a%d", rng.IntN(12))}
				objs[i] = w
			}
		},
		func() { // move an endpoint to or from this node
			if i := pick(isWEP); i >= 0 {
				w := objs[i].(*v3.WorkloadEndpoint).DeepCopy()
				if w.Spec.Node == Node {
					w.Spec.Node = "elsewhere"
				} else {
					w.Spec.Node = Node
				}
				objs[i] = w
			}
		},
		func() { // add and remove endpoints
			objs = append(objs, WEP("ns1", fmt.Sprintf("new%d", step), Node, fmt.Sprintf("calinew%d", step),
				fmt.Sprintf("10.250.%d.%d", step/200, step%200+1), map[string]string{"app": "a1"}))
			if i := pick(isWEP); i >= 0 {
				objs = slices.Delete(objs, i, i+1)
			}
		},
		func() { // a profile's labels
			if i := pick(isProf); i >= 0 {
				p := objs[i].(*v3.Profile).DeepCopy()
				p.Spec.LabelsToApply = map[string]string{"team": fmt.Sprintf("t%d", rng.IntN(5))}
				objs[i] = p
			}
		},
		func() { // a tier comes or goes
			if i := slices.IndexFunc(objs, func(o any) bool { _, ok := o.(*v3.Tier); return ok }); i >= 0 {
				objs = slices.Delete(objs, i, i+1)
			} else {
				objs = append(objs, Tier("security", 10, v3.Pass))
			}
		},
		func() { // a network set
			objs = append(objs, NetSet("ns1", fmt.Sprintf("set%d", step), map[string]string{"app": "a2"}, fmt.Sprintf("192.0.2.%d/32", step%250)))
		},
		func() { // a global policy's host endpoint flags
			i := pick(func(o any) bool { _, ok := o.(*v3.GlobalNetworkPolicy); return ok })
			if i < 0 {
				return
			}
			p := objs[i].(*v3.GlobalNetworkPolicy).DeepCopy()
			switch rng.IntN(4) {
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
			objs[i] = p
		},
		func() {}, // nothing changed
	}
	changes[rng.IntN(len(changes))]()
	rng.Shuffle(len(objs), func(i, j int) { objs[i], objs[j] = objs[j], objs[i] })
	return objs
}
