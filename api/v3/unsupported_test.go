package v3

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// An HTTP match is valid Calico (Validate accepts it, so felix can still
// read and enforce such a stored policy fail-closed) but a write refuses
// it with a message that says what to do instead. Services matches are
// written (felix enforces them on the Kubernetes datastore); only etcd's
// backend refuses them (ServicesMatches).
func TestUnsupportedRefusedAtWrite(t *testing.T) {
	svc := &ServiceMatch{Name: "api", Namespace: "prod"}
	for _, tc := range []struct {
		name string
		r    Resource
		want []string
	}{
		{"GlobalNetworkPolicy ingress source services and http", &GlobalNetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec: GlobalNetworkPolicySpec{Ingress: []Rule{{Action: Allow, Protocol: polProto("TCP"),
				Source: EntityRule{Services: svc}, HTTP: &HTTPMatch{Methods: []string{"GET"}}}}},
		}, []string{"spec.ingress[0].http: HTTP matches are not supported by Tabby"}},
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
	svcPol := &NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"},
		Spec: NetworkPolicySpec{Egress: []Rule{{Action: Deny, Destination: EntityRule{Services: svc}}}}}
	if err := DefaultValidateForWrite(svcPol.DeepCopy()); err != nil {
		t.Errorf("a services match is refused: %v", err)
	}
	if errs := ServicesMatches(svcPol); len(errs) != 1 || !strings.Contains(errs.Err().Error(), "spec.egress[0].destination.services: services matches need the Kubernetes datastore") {
		t.Errorf("ServicesMatches = %v, want the destination's services match", errs)
	}
}
