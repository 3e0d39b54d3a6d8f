package mirror

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestNamesRoundTrip: each controller maps a Kubernetes key to Calico's
// name and back, and claims no name outside its prefix.
func TestNamesRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		spec  Spec
		key   string
		want  datastore.Key
		other v3.Resource
	}{
		{Policy(nil, 0), "team/allow-web", datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: "team", Name: "knp.default.allow-web"},
			&v3.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-web", Namespace: "team"}}},
		{Namespaces(nil, 0), "team", datastore.Key{Kind: v3.KindProfile, Name: "kns.team"},
			&v3.Profile{ObjectMeta: metav1.ObjectMeta{Name: "ksa.team.robot"}}},
		{ServiceAccounts(nil, 0), "team/robot.v2", datastore.Key{Kind: v3.KindProfile, Name: "ksa.team.robot.v2"},
			&v3.Profile{ObjectMeta: metav1.ObjectMeta{Name: "kns.team"}}},
	} {
		got := tc.spec.Target(tc.key)
		if got != tc.want {
			t.Errorf("%s: Target(%q) = %v, want %v", tc.spec.Name, tc.key, got, tc.want)
		}
		var r v3.Resource
		if tc.want.Kind == v3.KindProfile {
			r = &v3.Profile{ObjectMeta: metav1.ObjectMeta{Name: got.Name}}
		} else {
			r = &v3.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: got.Name, Namespace: got.Namespace}}
		}
		if k, ok := tc.spec.Source(r); !ok || k != tc.key {
			t.Errorf("%s: Source(%s) = %q %v, want %q", tc.spec.Name, got.Name, k, ok, tc.key)
		}
		if k, ok := tc.spec.Source(tc.other); ok {
			t.Errorf("%s claims %s (%q)", tc.spec.Name, tc.other.GetName(), k)
		}
	}
}

// TestPolicyFailsClosed: a NetworkPolicy whose pod selector cannot be
// converted isolates every pod of its namespace instead of none.
func TestPolicyFailsClosed(t *testing.T) {
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "odd", Namespace: "team"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		}}
	r, err := Policy(nil, 0).Desired(np)
	if err == nil {
		t.Fatal("no error for an unconvertible selector")
	}
	p := r.(*v3.NetworkPolicy)
	if p.Name != "knp.default.odd" || p.Spec.Selector != "projectcalico.org/orchestrator == 'k8s'" ||
		len(p.Spec.Ingress)+len(p.Spec.Egress) != 0 || len(p.Spec.Types) != 2 {
		t.Fatalf("fail-closed policy %+v", p.Spec)
	}
}

func TestSameIgnoresIdentity(t *testing.T) {
	a := &v3.Profile{ObjectMeta: metav1.ObjectMeta{Name: "kns.x", ResourceVersion: "1"}, Spec: v3.ProfileSpec{LabelsToApply: map[string]string{"a": "b"}}}
	b := a.DeepCopy()
	b.ResourceVersion = "7"
	if !same(a, b) {
		t.Error("resource versions made a difference")
	}
	b.Spec.LabelsToApply["a"] = "c"
	if same(a, b) {
		t.Error("a spec change went unseen")
	}
	wl := WantLabels(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{ServiceAccountName: "sa"}})
	want := map[string]string{"app": "x", labelNamespace: "ns", labelOrchestrator: "k8s", labelServiceAccount: "sa"}
	if len(wl) != len(want) {
		t.Fatalf("labels %v", wl)
	}
	for k, v := range want {
		if wl[k] != v {
			t.Fatalf("labels %v, want %v", wl, want)
		}
	}
}

// TestClusterPolicyMixedNetsStorable: a ClusterNetworkPolicy denying
// egress to networks of both IP versions (network-policy-api
// conformance's inline-cidr-as-peers-example) is mirrored as a policy the
// etcd datastore stores: one Deny per IP version. (Calico's one mixed rule
// is refused by etcd's write checks, which left the policy unmirrored.)
func TestClusterPolicyMixedNetsStorable(t *testing.T) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policy.networking.k8s.io/v1alpha2", "kind": "ClusterNetworkPolicy",
		"metadata": map[string]any{"name": "inline-cidr", "uid": "0b8d8a51-5d4c-4d21-9d41-3b7b1f0c2a10"},
		"spec": map[string]any{"tier": "Admin", "priority": int64(85),
			"subject": map[string]any{"namespaces": map[string]any{}},
			"egress": []any{map[string]any{"action": "Deny",
				"to": []any{map[string]any{"networks": []any{"0.0.0.0/0", "::/0"}}}}}},
	}}
	r, err := ClusterPolicy(nil, 0).Desired(u)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := datastore.PrepareWrite("create", r); err != nil {
		t.Fatalf("the mirrored policy cannot be stored: %v", err)
	}
	eg := r.(*v3.GlobalNetworkPolicy).Spec.Egress
	if len(eg) != 2 || *eg[0].IPVersion != 4 || eg[0].Destination.Nets[0] != "0.0.0.0/0" || *eg[1].IPVersion != 6 || eg[1].Destination.Nets[0] != "::/0" {
		t.Fatalf("egress %+v, want a Deny to 0.0.0.0/0 (IPv4) and one to ::/0 (IPv6)", eg)
	}
}
