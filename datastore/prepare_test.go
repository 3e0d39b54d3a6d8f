package datastore

import (
	"errors"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Every backend write goes through PrepareWrite: a policy with a match
// Tabby cannot enforce (here an HTTP match) is refused as invalid, so
// it never reaches the store meaning more than felix enforces.
func TestPrepareWriteRefusesUnsupported(t *testing.T) {
	np := &v3.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: "projectcalico.org/v3"},
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "prod"},
		Spec: v3.NetworkPolicySpec{Egress: []v3.Rule{{Action: v3.Allow,
			HTTP: &v3.HTTPMatch{Methods: []string{"GET"}}}}},
	}
	_, err := PrepareWrite("create", np)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "HTTP matches are not supported") {
		t.Fatalf("PrepareWrite = %v, want an invalid-resource error naming the HTTP match", err)
	}
	np.Spec.Egress[0].HTTP = nil
	np.Spec.Egress[0].Destination = v3.EntityRule{Selector: "app == 'api'"}
	if _, err := PrepareWrite("create", np); err != nil {
		t.Fatalf("PrepareWrite of a supported policy: %v", err)
	}
}
