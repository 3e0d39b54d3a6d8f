package lab

import (
	"context"
	"reflect"
	"slices"
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func TestChainsDiff(t *testing.T) {
	save := `*filter
:cali-pi-A - [0:0]
:cali-pi-B - [0:0]
:cali-tw-cali123 - [0:0]
-A cali-pi-A -m comment --comment "cali:h1" -p tcp -m tcp --dport 80 -j MARK --set-xmark 0x10000/0x10000
-A cali-pi-A -m comment --comment "cali:h2" -m mark --mark 0x10000/0x10000 -m comment --comment "Return if policy accepted" -j RETURN
-A cali-tw-cali123 -m comment --comment "cali:x" -j cali-pi-A
COMMIT
`
	present := func(hashes ...string) chainWant { return chainWant{present: true, hashes: hashes} }
	for _, tc := range []struct {
		name string
		want map[string]chainWant
		diff string
	}{
		{"present, used, the expected rules", map[string]chainWant{"cali-pi-A": present("h1", "h2")}, ""},
		{"declared, not jumped to", map[string]chainWant{"cali-pi-B": present()}, "chain cali-pi-B not used yet"},
		{"missing", map[string]chainWant{"cali-pi-C": present()}, "no chain cali-pi-C"},
		{"should be gone", map[string]chainWant{"cali-pi-A": {}, "cali-pi-C": {}}, "chain cali-pi-A still there"},
		// An edited policy: the chain is there, with the old rules.
		{"old rules", map[string]chainWant{"cali-pi-A": present("h1", "h3")}, "chain cali-pi-A holds other rules than the policy's (2 rules, want 2)"},
		{"a rule short", map[string]chainWant{"cali-pi-A": present("h1", "h2", "h3")}, "chain cali-pi-A holds other rules than the policy's (2 rules, want 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chainsDiff(save, tc.want); got != tc.diff {
				t.Errorf("got %q, want %q", got, tc.diff)
			}
		})
	}
}

// The expected rules are felix's rendering of the policy as it is now:
// an edit that changes the rules changes them; one that changes nothing
// felix renders (a label of the policy itself) leaves them equal.
func TestExpectedRuleHashes(t *testing.T) {
	l := &Lab{State: &State{Model: DefaultModel()}}
	pod := PodState{Namespace: "x", Name: "a", Node: "node0", IP: "10.200.0.1"}
	port := func(p int32) []networkingv1.NetworkPolicyPort {
		pp := intstr.FromInt32(p)
		return []networkingv1.NetworkPolicyPort{{Port: &pp}}
	}
	hashes := func(np *networkingv1.NetworkPolicy) []string {
		t.Helper()
		pol, err := kdd.K8sNetworkPolicyToCalico(np)
		if err != nil {
			t.Fatal(err)
		}
		r := PolicyRef{Tier: "default", Namespace: "x", Name: pol.Name, Selector: pol.Spec.Selector, Types: pol.Spec.Types, Policy: pol}
		got, err := l.expectedRuleHashes(context.Background(), r, pod)
		if err != nil {
			t.Fatal(err)
		}
		chain := r.chains()[0]
		if len(got) != 1 || len(got[chain]) == 0 {
			t.Fatalf("rendered %v, want the rules of one chain %s", got, chain)
		}
		return got[chain]
	}
	np := func(p int32) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow", Namespace: "x"},
			Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{{Ports: port(p), From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"ns": "y"}}}}}}}}
	}
	on80, on81 := hashes(np(80)), hashes(np(81))
	if slices.Equal(on80, on81) {
		t.Errorf("port 80 and port 81 render the same rules %v", on80)
	}
	labelled := np(80)
	labelled.Labels = map[string]string{"team": "blue"}
	if got := hashes(labelled); !slices.Equal(got, on80) {
		t.Errorf("a label of the policy changed its rules: %v, was %v", got, on80)
	}
}

func TestChainRuleHashes(t *testing.T) {
	got := chainRuleHashes(`*filter
:cali-pi-A - [0:0]
-A cali-pi-A -m comment --comment "cali:Ab-_9" -j ACCEPT
-A cali-pi-A -m comment --comment cali:Zz0 -m comment --comment "cali:not-this" -j DROP
-A OUTPUT -j ACCEPT
COMMIT
`)
	if want := map[string][]string{"cali-pi-A": {"Ab-_9", "Zz0"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}

// The wait expects a policy's chains exactly on the nodes of the pods it
// selects, with the labels felix gives them.
func TestSelects(t *testing.T) {
	l := &Lab{State: &State{Model: DefaultModel()}}
	pod := func(ns, name string) PodState { return PodState{Namespace: ns, Name: name} }
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "x"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"pod": "a"}}}}
	pol, err := kdd.K8sNetworkPolicyToCalico(np)
	if err != nil {
		t.Fatal(err)
	}
	knp := PolicyRef{Tier: "default", Namespace: "x", Name: pol.Name, Selector: pol.Spec.Selector, Types: pol.Spec.Types}
	gnp := PolicyRef{Tier: "default", Name: "g", Selector: "pod in {'b', 'c'}", NamespaceSelector: "ns == 'y'", Types: []v3.PolicyType{v3.PolicyTypeIngress}}
	for _, tc := range []struct {
		ref  PolicyRef
		pod  PodState
		want bool
	}{
		{knp, pod("x", "a"), true},
		{knp, pod("x", "b"), false},
		{knp, pod("y", "a"), false}, // another namespace
		{gnp, pod("y", "b"), true},
		{gnp, pod("y", "a"), false},
		{gnp, pod("z", "b"), false},
		{PolicyRef{Name: "all", Selector: "pcns.ns == 'z'"}, pod("z", "c"), true},
	} {
		got, err := l.selects(tc.ref, tc.pod)
		if err != nil || got != tc.want {
			t.Errorf("%s selects %s: %v %v, want %v", tc.ref.Name, tc.pod.Key(), got, err, tc.want)
		}
	}
}
