package v3

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A services or HTTP match is valid Calico (Validate accepts it, so felix
// can still read and enforce such a stored policy fail-closed) but a
// write refuses it with a message that says what to do instead.
func TestUnsupportedRefusedAtWrite(t *testing.T) {
	svc := &ServiceMatch{Name: "api", Namespace: "prod"}
	for _, tc := range []struct {
		name string
		r    Resource
		want []string
	}{
		{"NetworkPolicy egress destination services", &NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"},
			Spec:       NetworkPolicySpec{Egress: []Rule{{Action: Deny, Destination: EntityRule{Services: svc}}}},
		}, []string{"spec.egress[0].destination.services: services matches are not supported by Tabby yet"}},
		{"GlobalNetworkPolicy ingress source services and http", &GlobalNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: GlobalNetworkPolicySpec{Ingress: []Rule{{Action: Allow, Protocol: polProto("TCP"),
				Source: EntityRule{Services: svc}, HTTP: &HTTPMatch{Methods: []string{"GET"}}}}},
		}, []string{"spec.ingress[0].source.services: services matches", "spec.ingress[0].http: HTTP matches are not supported by Tabby"}},
		{"Profile", &Profile{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec:       ProfileSpec{Ingress: []Rule{{Action: Deny, Source: EntityRule{Services: svc}}}},
		}, []string{"spec.ingress[0].source.services"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if errs := tc.r.DeepCopyObject().(Resource).Validate(); len(errs) != 0 {
				t.Fatalf("Validate (Calico's rules) = %v, want valid", errs)
			}
			err := DefaultValidateForWrite(tc.r.DeepCopyObject().(Resource))
			if err == nil {
				t.Fatal("accepted for write")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	ok := &NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"},
		Spec: NetworkPolicySpec{Ingress: []Rule{{Action: Allow, Source: EntityRule{Selector: "app == 'x'"}}}}}
	if err := DefaultValidateForWrite(ok); err != nil {
		t.Errorf("a supported policy is refused: %v", err)
	}
}
