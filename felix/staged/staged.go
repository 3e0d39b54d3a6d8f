// Package staged converts the three staged policy kinds into what
// felix's calculation evaluates as pending (calc.StagedPolicy): the
// pure calc.NewStaged for Calico's own kinds, and the Kubernetes
// NetworkPolicy conversion (datastore/kdd, the one reading of Kubernetes
// policies) for StagedKubernetesNetworkPolicy. The flow log collector and
// `calicoctl policy trace` both use it, so their pending verdicts agree.
package staged

import (
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/calc"
)

// Kinds are the staged policy kinds.
var Kinds = []string{v3.KindStagedNetworkPolicy, v3.KindStagedGlobalNetworkPolicy, v3.KindStagedKubernetesNetworkPolicy}

// IsStaged reports whether r is a staged policy.
func IsStaged(r any) bool {
	switch r.(type) {
	case *v3.StagedNetworkPolicy, *v3.StagedGlobalNetworkPolicy, *v3.StagedKubernetesNetworkPolicy:
		return true
	}
	return false
}

// Convert is the policy a staged policy stages (nil for a Delete, which
// stages nothing in Calico's pending verdicts).
func Convert(r v3.Resource) (*calc.StagedPolicy, error) {
	if s, ok := calc.NewStaged(r); ok {
		return s, nil
	}
	k, ok := r.(*v3.StagedKubernetesNetworkPolicy)
	if !ok {
		return nil, fmt.Errorf("%T is not a staged policy", r)
	}
	action, k8s := k.Enforced()
	if action == v3.StagedActionDelete {
		return nil, nil
	}
	np, err := kdd.K8sNetworkPolicyToCalico(k8s)
	if err != nil && np == nil {
		return nil, fmt.Errorf("StagedKubernetesNetworkPolicy %s/%s: %w", k.Namespace, k.Name, err)
	}
	np.ResourceVersion = k.ResourceVersion
	np.Default()
	return &calc.StagedPolicy{Kind: v3.KindStagedKubernetesNetworkPolicy, Policy: np}, nil
}
