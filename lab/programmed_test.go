package lab

import (
	"testing"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
)

func TestChainsDiff(t *testing.T) {
	save := `*filter
:cali-pi-A - [0:0]
:cali-pi-B - [0:0]
:cali-tw-cali123 - [0:0]
-A cali-tw-cali123 -m comment --comment "cali:x" -j cali-pi-A
COMMIT
`
	for _, tc := range []struct {
		name string
		want map[string]bool
		diff string
	}{
		{"present and used", map[string]bool{"cali-pi-A": true}, ""},
		{"declared, not jumped to", map[string]bool{"cali-pi-B": true}, "chain cali-pi-B not used yet"},
		{"missing", map[string]bool{"cali-pi-C": true}, "no chain cali-pi-C"},
		{"should be gone", map[string]bool{"cali-pi-A": false, "cali-pi-C": false}, "chain cali-pi-A still there"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := chainsDiff(save, tc.want); got != tc.diff {
				t.Errorf("got %q, want %q", got, tc.diff)
			}
		})
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
