package calc_test

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestEngineEquivalence applies random sequences of updates (endpoints
// added, relabelled, moved, deleted; policies, profiles, namespaces'
// labels, tiers, network sets and host endpoints edited; bad input of
// every kind) to an Engine, one to three per Flush, and checks after
// every Flush that its Result equals a from-scratch Compute of the same
// objects, and that its Delta names every ipset change. The long run:
// TABBY_ENGINE_SEEDS=50 TABBY_ENGINE_STEPS=2000.
func TestEngineEquivalence(t *testing.T) {
	seeds, steps := envInt(t, "TABBY_ENGINE_SEEDS", 3), envInt(t, "TABBY_ENGINE_STEPS", 300)
	if testing.Short() {
		seeds, steps = 1, 100
	}
	total := 0
	for seed := range seeds {
		total += runEquivalence(t, uint64(seed), steps)
		if t.Failed() {
			return
		}
		if seeds > 3 { // a long run: show progress
			t.Logf("seed %d: %d steps passed (%d updates so far)", seed, steps, total)
		}
	}
	t.Logf("%d seeds x %d steps: %d updates checked", seeds, steps, total)
}

func envInt(t *testing.T, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return n
}

var resultOpts = []cmp.Option{cmpopts.EquateComparable(netip.Prefix{})}

func runEquivalence(t *testing.T, seed uint64, steps int) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 99))
	g := &gen{rng: rng, objs: map[string]any{}}
	e := calc.NewEngine(ct.Node)
	// Odd seeds run as on the etcd datastore: services matches are not
	// followed (and fail closed).
	follows := seed%2 == 0
	if follows {
		e.FollowServices()
	}
	// Start from a mixed cluster (small, to keep the from-scratch
	// oracle cheap), loaded in random order.
	base := append(ct.Synthetic(16, 6, 24), ct.Scenario()...)
	rng.Shuffle(len(base), func(i, j int) { base[i], base[j] = base[j], base[i] })
	for _, o := range base {
		g.put(e, o)
	}
	prev := map[string]*calc.IPSet{}
	updates, svcSteps := 0, 0
	for step := range steps {
		n := 1 + rng.IntN(3)
		if step == 0 {
			n = 0
		}
		for range n {
			g.step(e, step)
			updates++
		}
		got, delta := e.Flush()
		in := ct.Input(ct.Node, g.list())
		in.FollowsServices = follows
		want := calc.Compute(in)
		// cmp.Diff is the slow part: it runs only to explain a
		// difference DeepEqual found.
		if !reflect.DeepEqual(ct.PlainSets(want), ct.PlainSets(got)) {
			diff := cmp.Diff(want, got, resultOpts...)
			t.Fatalf("seed %d step %d (last change: %s): engine differs from Compute (-compute +engine):\n%s", seed, step, g.last, diff)
		}
		checkSetDelta(t, seed, step, prev, got.IPSets, delta)
		if n := calc.IdleProfileStates(e); n > 0 {
			t.Fatalf("seed %d step %d (last change: %s): %d profile names kept that nothing uses", seed, step, g.last, n)
		}
		prev = got.IPSets
		if follows && hasServiceMembers(got) {
			svcSteps++
		}
	}
	if follows && svcSteps == 0 {
		t.Errorf("seed %d: no step had a services set with members: the run did not cover them", seed)
	}
	return updates
}

// hasServiceMembers reports whether a services set of res has members.
func hasServiceMembers(res *calc.Result) bool {
	for id, s := range res.IPSets {
		if strings.HasPrefix(id, "svc") && s.Members.Len() > 0 {
			return true
		}
	}
	return false
}

// checkSetDelta checks that applying delta's ipset changes to prev gives
// next.
func checkSetDelta(t *testing.T, seed uint64, step int, prev, next map[string]*calc.IPSet, d *calc.Delta) {
	t.Helper()
	members := map[string][]string{}
	for id, s := range prev {
		members[id] = s.Members.Slice()
	}
	for _, sd := range d.IPSets {
		switch {
		case sd.Created:
			members[sd.ID] = sd.Added
		case sd.Deleted:
			delete(members, sd.ID)
		default:
			m := slices.DeleteFunc(slices.Clone(members[sd.ID]), func(s string) bool { return slices.Contains(sd.Removed, s) })
			m = append(m, sd.Added...)
			slices.Sort(m)
			members[sd.ID] = m
		}
	}
	want := map[string][]string{}
	for id, s := range next {
		want[id] = s.Members.Slice()
	}
	if diff := cmp.Diff(want, members, cmpopts.EquateEmpty()); diff != "" {
		t.Fatalf("seed %d step %d: ipset delta does not lead from the last sets to these (-want +applied):\n%s", seed, step, diff)
	}
}

// gen makes random changes to a small cluster, keeping the model (objs)
// and the engine in step.
type gen struct {
	rng  *rand.Rand
	objs map[string]any // by kind/namespace/name
	last string
}

func objKey(o any) string {
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		return "wep/" + o.Namespace + "/" + o.Name
	case *v3.HostEndpoint:
		return "hep//" + o.Name
	case *v3.NetworkPolicy:
		return "np/" + o.Namespace + "/" + o.Name
	case *v3.GlobalNetworkPolicy:
		return "gnp//" + o.Name
	case *v3.Tier:
		return "tier//" + o.Name
	case *v3.Profile:
		return "profile//" + o.Name
	case *v3.NetworkSet:
		return "netset/" + o.Namespace + "/" + o.Name
	case *v3.GlobalNetworkSet:
		return "gnetset//" + o.Name
	case *v3.KubernetesEndpointSlice:
		return "slice/" + o.Namespace + "/" + o.Name
	}
	panic(fmt.Sprintf("unexpected %T", o))
}

func (g *gen) put(e *calc.Engine, o any) {
	g.objs[objKey(o)] = o
	if !e.Upsert(o) {
		panic(fmt.Sprintf("engine refused %T", o))
	}
	g.last = "upsert " + objKey(o)
}

func (g *gen) del(e *calc.Engine, key string) {
	o := g.objs[key]
	delete(g.objs, key)
	e.Delete(o)
	g.last = "delete " + key
}

// list returns the model's objects, shuffled.
func (g *gen) list() []any {
	out := make([]any, 0, len(g.objs))
	for _, k := range slices.Sorted(mapsKeys(g.objs)) {
		out = append(out, g.objs[k])
	}
	g.rng.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func mapsKeys(m map[string]any) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// pick returns the key of a random object of kind prefix, or "".
func (g *gen) pick(prefix string) string {
	var keys []string
	for k := range g.objs {
		if len(k) > len(prefix) && k[:len(prefix)] == prefix {
			keys = append(keys, k)
		}
	}
	if len(keys) == 0 {
		return ""
	}
	slices.Sort(keys)
	return keys[g.rng.IntN(len(keys))]
}

func (g *gen) oneOf(ss ...string) string { return ss[g.rng.IntN(len(ss))] }

var (
	genNamespaces = []string{"ns0", "ns1", "ns2", "prod", "dev", "nsx"} // nsx has no kns. profile at first
	genApps       = []string{"a0", "a1", "a2", "a3", "web", "db"}
	genTiers      = []string{"", "default", "security", "platform", "missing"}
)

func (g *gen) labels() map[string]string {
	l := map[string]string{"app": g.oneOf(genApps...)}
	if g.rng.IntN(3) == 0 {
		l["role"] = g.oneOf("node", "partner", "blocked")
	}
	return l
}

func (g *gen) selector() string {
	switch g.rng.IntN(9) {
	case 0:
		return ""
	case 1:
		return "all()"
	case 2:
		return "app == " // does not parse
	case 3:
		return "has(role)"
	case 4:
		return fmt.Sprintf("app in {'%s', '%s'}", g.oneOf(genApps...), g.oneOf(genApps...))
	default:
		return fmt.Sprintf("app == '%s'", g.oneOf(genApps...))
	}
}

func (g *gen) wep(node string) *v3.WorkloadEndpoint {
	ns := g.oneOf(genNamespaces...)
	pod := fmt.Sprintf("p%d", g.rng.IntN(40))
	// Few addresses: two endpoints often share one (members are counted).
	ip := fmt.Sprintf("10.70.0.%d", 1+g.rng.IntN(24))
	w := ct.WEP(ns, pod, node, "cali"+pod, ip, g.labels())
	switch g.rng.IntN(12) {
	case 0:
		w.Spec.IPNetworks = []string{"not-an-ip"}
	case 1:
		w.Spec.Profiles = append(w.Spec.Profiles, "missing-profile")
	case 2:
		w.Spec.Profiles = append(w.Spec.Profiles, "extra")
	case 3:
		w.Spec.InterfaceName = "" // invalid when local
	case 4:
		w.Spec.IPNetworks = append(w.Spec.IPNetworks, "fd00::"+strconv.Itoa(1+g.rng.IntN(5))+"/128")
	}
	if g.rng.IntN(2) == 0 {
		w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: g.oneOf("http", "dns"), Protocol: numorstring.ProtocolFromString(g.oneOf("TCP", "UDP")), Port: uint16(8080 + g.rng.IntN(2))}}
	}
	if g.rng.IntN(4) == 0 {
		w.Spec.ServiceAccountName = g.oneOf("tester", "builder")
	}
	return w
}

// slice is a random EndpointSlice of a Service "svc" or "api" in prod or
// dev: a few endpoints sharing addresses with the generated endpoints
// (members are counted), sometimes IPv6 or not an IP, with ports of every
// protocol, some without a number.
func (g *gen) slice() *v3.KubernetesEndpointSlice {
	var addrs []string
	for range g.rng.IntN(4) {
		switch g.rng.IntN(8) {
		case 0:
			addrs = append(addrs, "fd00::"+strconv.Itoa(1+g.rng.IntN(5)))
		case 1:
			addrs = append(addrs, "db.example")
		default:
			addrs = append(addrs, fmt.Sprintf("10.70.0.%d", 1+g.rng.IntN(24)))
		}
	}
	var ports []ct.SlicePort
	for range g.rng.IntN(3) {
		p := ct.SlicePort{Proto: g.oneOf("", "TCP", "UDP", "SCTP")}
		if g.rng.IntN(5) > 0 {
			p.Port = int32(80 + g.rng.IntN(3))
		}
		ports = append(ports, p)
	}
	ns := g.oneOf("prod", "dev")
	return ct.EndpointSlice(ns, fmt.Sprintf("%s-%d", ns, g.rng.IntN(5)), g.oneOf("svc", "api"), addrs, ports...)
}

func (g *gen) entity() v3.EntityRule {
	var r v3.EntityRule
	switch g.rng.IntN(8) {
	case 0:
		r.Selector = g.selector()
	case 1:
		r.NamespaceSelector = g.oneOf("team == 'a'", "team == 'b'", "all()", "team == ")
		r.Selector = g.oneOf("", "app == 'a1'")
	case 2:
		r.NotSelector = g.oneOf("app == 'web'", "has(role)")
	case 3:
		r.ServiceAccounts = &v3.ServiceAccountMatch{Names: []string{g.oneOf("tester", "builder")}}
	case 4:
		r.Nets = []string{g.oneOf("10.0.0.0/8", "192.0.2.1/32"), g.oneOf("172.16.0.0/12", "10.0.0.0/8")}
	case 5:
		r.Services = &v3.ServiceMatch{Name: g.oneOf("svc", "api"), Namespace: g.oneOf("prod", "dev", "")}
	}
	return r
}

func (g *gen) rules() []v3.Rule {
	var out []v3.Rule
	for range g.rng.IntN(3) {
		r := v3.Rule{Action: v3.Action(g.oneOf("Allow", "Allow", "Deny", "Pass", "Log")), Source: g.entity(), Destination: g.entity()}
		if g.rng.IntN(2) == 0 {
			r.Protocol = ct.Proto(g.oneOf("TCP", "UDP"))
			if g.rng.IntN(2) == 0 {
				r.Destination.Ports = ct.Ports(g.oneOf("http", "dns", "80", "8000:8100"))
			}
		}
		out = append(out, r)
	}
	return out
}

// dirRules is rules for one direction of a policy: mostly with their
// services matches where validation allows them (an ingress rule's
// source, an egress rule's destination, without destination ports), so
// that policies with services matches are valid and in effect.
func (g *gen) dirRules(egress bool) []v3.Rule {
	rules := g.rules()
	if g.rng.IntN(4) == 0 {
		return rules // as generated: often invalid
	}
	for i := range rules {
		r := &rules[i]
		if !egress && r.Destination.Services != nil {
			r.Source = v3.EntityRule{Services: r.Destination.Services}
			r.Destination.Services = nil
		}
		if egress && r.Source.Services != nil {
			r.Destination = v3.EntityRule{Services: r.Source.Services}
			r.Source.Services = nil
		}
	}
	return rules
}

func (g *gen) types() []v3.PolicyType {
	switch g.rng.IntN(4) {
	case 0:
		return ct.Ingress
	case 1:
		return ct.Egress
	case 2:
		return ct.Both
	}
	return nil
}

func (g *gen) order() *float64 {
	if g.rng.IntN(4) == 0 {
		return nil
	}
	return ct.Ptr(float64(g.rng.IntN(4)))
}

func (g *gen) step(e *calc.Engine, step int) {
	node := ct.Node
	if g.rng.IntN(2) == 0 {
		node = g.oneOf("node2", "node3")
	}
	switch g.rng.IntN(23) {
	case 0, 1, 2: // an endpoint added or replaced
		g.put(e, g.wep(node))
	case 3: // relabelled
		if k := g.pick("wep/"); k != "" {
			w := g.objs[k].(*v3.WorkloadEndpoint).DeepCopy()
			w.Labels = g.labels()
			w.Labels["projectcalico.org/namespace"] = w.Namespace
			g.put(e, w)
		}
	case 4: // moved to or from this node
		if k := g.pick("wep/"); k != "" {
			w := g.objs[k].(*v3.WorkloadEndpoint).DeepCopy()
			if w.Spec.Node == ct.Node {
				w.Spec.Node = "node2"
			} else {
				w.Spec.Node = ct.Node
			}
			g.put(e, w)
		}
	case 5, 6: // deleted
		if k := g.pick("wep/"); k != "" {
			g.del(e, k)
		}
	case 7: // a namespaced policy
		name := fmt.Sprintf("np%d", g.rng.IntN(12))
		p := ct.NP(g.oneOf(genNamespaces...), name, g.order(), g.selector(), g.types(), g.dirRules(false), g.dirRules(true))
		p.Spec.Tier = g.oneOf(genTiers...)
		if g.rng.IntN(10) == 0 {
			p.Spec.Types = []v3.PolicyType{"Sideways"} // invalid
		}
		g.put(e, p)
	case 8: // a global policy, maybe for host endpoints
		p := ct.GNP(fmt.Sprintf("gnp%d", g.rng.IntN(8)), g.oneOf(genTiers...), g.order(), g.selector(), g.types(), g.dirRules(false), g.dirRules(true))
		if g.rng.IntN(3) == 0 {
			p.Spec.NamespaceSelector = g.oneOf("team == 'a'", "all()")
		}
		switch g.rng.IntN(5) {
		case 0:
			ct.HostPolicy(p, true, false, false)
		case 1:
			if len(p.Spec.Egress) == 0 && !slices.Contains(p.Spec.Types, v3.PolicyTypeEgress) {
				ct.HostPolicy(p, true, true, false)
			}
		case 2:
			ct.HostPolicy(p, true, false, true)
		}
		g.put(e, p)
	case 9: // a policy deleted
		if k := g.pick(g.oneOf("np/", "gnp/")); k != "" {
			g.del(e, k)
		}
	case 10: // a tier's order or action, or it goes
		name := g.oneOf("security", "platform", "default", "Bad_Tier")
		if k := "tier//" + name; g.objs[k] != nil && g.rng.IntN(3) == 0 {
			g.del(e, k)
		} else {
			g.put(e, ct.Tier(name, float64(g.rng.IntN(300)), v3.Action(g.oneOf("Deny", "Pass"))))
		}
	case 11: // a namespace's labels
		ns := g.oneOf(genNamespaces...)
		g.put(e, ct.NSProfile(ns, map[string]string{"team": g.oneOf("a", "b", "c")}))
	case 12: // a namespace profile goes, or the extra profile changes
		if g.rng.IntN(2) == 0 {
			if k := g.pick("profile//kns."); k != "" {
				g.del(e, k)
			}
			return
		}
		p := ct.NSProfile("x", map[string]string{"team": g.oneOf("a", "b")})
		p.Name = "extra"
		p.Spec.LabelsToApply = map[string]string{g.oneOf("app", "role", "tier"): g.oneOf("web", "node", "x")}
		p.Spec.Ingress = g.rules()
		if g.rng.IntN(6) == 0 {
			p.Spec.LabelsToApply = map[string]string{"bad key!": "x"} // invalid
		}
		g.put(e, p)
	case 13: // network sets
		if g.rng.IntN(2) == 0 {
			g.put(e, ct.NetSet(g.oneOf(genNamespaces...), fmt.Sprintf("set%d", g.rng.IntN(5)), g.labels(),
				fmt.Sprintf("192.0.2.%d/32", g.rng.IntN(8)), g.oneOf("198.51.100.0/24", "bad-net")))
		} else {
			g.put(e, ct.GlobalNetSet(fmt.Sprintf("gset%d", g.rng.IntN(5)), g.labels(), fmt.Sprintf("203.0.113.%d/32", g.rng.IntN(8))))
		}
	case 14: // a network set goes
		if k := g.pick(g.oneOf("netset/", "gnetset/")); k != "" {
			g.del(e, k)
		}
	case 15: // host endpoints
		name := fmt.Sprintf("hep%d", g.rng.IntN(5))
		iface := g.oneOf("eth0", "eth1", "*", "")
		ips := []string{fmt.Sprintf("192.168.0.%d", 1+g.rng.IntN(6))}
		if iface == "*" && g.rng.IntN(2) == 0 {
			ips = nil
		}
		h := ct.HEP(name, node, iface, g.labels(), ips...)
		if g.rng.IntN(4) == 0 {
			h.Spec.Profiles = []string{g.oneOf("extra", "kns.ns1", "missing-profile")}
		}
		if g.rng.IntN(8) == 0 {
			h.Spec.ExpectedIPs = []string{"999.1.1.1"}
		}
		g.put(e, h)
	case 16:
		if k := g.pick("hep/"); k != "" {
			g.del(e, k)
		}
	case 17: // the synthetic policies' rules or selectors (ct.Mutate's kinds)
		if k := g.pick("np/"); k != "" {
			p := g.objs[k].(*v3.NetworkPolicy).DeepCopy()
			if g.rng.IntN(2) == 0 {
				p.Spec.Ingress = append(p.Spec.Ingress, v3.Rule{Action: v3.Deny, Protocol: ct.Proto("UDP"), Destination: v3.EntityRule{Ports: ct.Ports(fmt.Sprint(1000 + step))}})
			} else {
				p.Spec.Selector = g.selector()
				p.Spec.Order = g.order()
			}
			g.put(e, p)
		}
	case 19: // an endpoint's addresses or named ports only
		if k := g.pick("wep/"); k != "" {
			w := g.objs[k].(*v3.WorkloadEndpoint).DeepCopy()
			if g.rng.IntN(2) == 0 {
				w.Spec.IPNetworks = []string{fmt.Sprintf("10.70.0.%d/32", 1+g.rng.IntN(24))}
			} else {
				w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: uint16(8080 + g.rng.IntN(3))}}
			}
			g.put(e, w)
		}
	case 18: // the same object again (a resync)
		if k := g.pick(""); k != "" {
			g.put(e, g.objs[k])
		}
	case 21: // a Service's EndpointSlice added or changed
		g.put(e, g.slice())
	case 22: // one goes
		if k := g.pick("slice/"); k != "" {
			g.del(e, k)
		}
	default: // deleting something that is not there
		e.Delete(ct.WEP("nowhere", "ghost", ct.Node, "caligh", "10.1.1.1", nil))
		g.last = "delete of a missing object"
	}
}

// TestEngineRemoteEndpointTouchesOnlySets: a remote endpoint coming and
// going changes ipset members only; every endpoint, policy and set it does
// not touch keeps its identity (what lets the renderer skip them).
func TestEngineRemoteEndpointTouchesOnlySets(t *testing.T) {
	e := calc.NewEngine(ct.Node)
	for _, o := range ct.Synthetic(40, 12, 200) {
		e.Upsert(o)
	}
	before, _ := e.Flush()
	extra := ct.WEP("ns1", "extra", "node9", "caliextra", "10.250.0.1", map[string]string{"app": "a1"})
	e.Upsert(extra)
	after, d := e.Flush()
	if len(d.Endpoints)+len(d.Policies)+len(d.Profiles) != 0 || d.Problems || d.Unrenderable {
		t.Fatalf("a remote endpoint changed more than sets: %+v", d)
	}
	if len(d.IPSets) == 0 {
		t.Fatal("no set changed")
	}
	changed := map[string]bool{}
	for _, sd := range d.IPSets {
		changed[sd.ID] = true
		if sd.Created || sd.Deleted || len(sd.Removed) != 0 || !slices.Equal(sd.Added, []string{"10.250.0.1/32"}) {
			t.Errorf("set %s: %+v, want 10.250.0.1/32 added", sd.ID, sd)
		}
	}
	for id, s := range after.IPSets {
		if !changed[id] && before.IPSets[id] != s {
			t.Errorf("set %s is a new object though unchanged", id)
		}
	}
	for id, p := range after.Policies {
		if before.Policies[id] != p {
			t.Errorf("policy %s is a new object", id)
		}
	}
	for i := range after.Endpoints {
		if !reflect.DeepEqual(before.Endpoints[i], after.Endpoints[i]) || (len(after.Endpoints[i].Ingress) > 0 && &before.Endpoints[i].Ingress[0] != &after.Endpoints[i].Ingress[0]) {
			t.Errorf("endpoint %s's lists are new objects", after.Endpoints[i].Key)
		}
	}
	e.Delete(extra)
	final, d := e.Flush()
	if diff := cmp.Diff(before, final, resultOpts...); diff != "" {
		t.Fatalf("after the endpoint went (-before +after):\n%s", diff)
	}
	for _, sd := range d.IPSets {
		if !slices.Equal(sd.Removed, []string{"10.250.0.1/32"}) || len(sd.Added) != 0 {
			t.Errorf("set %s: %+v, want 10.250.0.1/32 removed", sd.ID, sd)
		}
	}
}
