package daemon

import (
	"slices"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestStagedPoliciesNotWatched: staged policies are stored and served but,
// as in Calico, never enforced, so felix's policy path does not watch them
// (and calc.Input has no place for them).
func TestStagedPoliciesNotWatched(t *testing.T) {
	for _, k := range []string{
		v3.KindStagedGlobalNetworkPolicy, v3.KindStagedNetworkPolicy, v3.KindStagedKubernetesNetworkPolicy,
	} {
		if _, ok := v3.LookupKind(k); !ok {
			t.Errorf("kind %s is not registered", k)
		}
		if slices.Contains(Kinds, k) {
			t.Errorf("felix watches %s; staged policies must not be enforced", k)
		}
	}
}
