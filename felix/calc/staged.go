package calc

import (
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Staged policies, as Calico evaluates them for pending verdicts: a
// staged policy is a policy of its own (not a replacement of the
// enforced policy of its name), placed in its tier by its order like any
// other, and never enforced. A StagedAction Delete stages nothing
// (Calico's syncer does not send it to felix). The calculation names a
// staged policy "staged:<name>" (Calico's own v1 name for it), which no
// stored policy can take, so both can apply at once.

// StagedPolicy is a staged policy converted to the policy it stages.
type StagedPolicy struct {
	// Kind is the staged kind (StagedNetworkPolicy,
	// StagedGlobalNetworkPolicy, StagedKubernetesNetworkPolicy).
	Kind string
	// Policy is the enforced form: a *v3.NetworkPolicy (a staged
	// Kubernetes policy as knp.default.<name>) or *v3.GlobalNetworkPolicy.
	Policy v3.Resource
}

// StagedPrefix starts the calculation's name of a staged policy.
const StagedPrefix = "staged:"

// StagedName is the calculation's name of the staged policy name.
func StagedName(name string) string { return StagedPrefix + name }

// IsStaged reports whether id names a staged policy.
func IsStaged(id PolicyID) bool { return strings.HasPrefix(id.Name, StagedPrefix) }

// StagedKind is the kind of a staged policy's ID and its name as written
// (a staged Kubernetes policy's without "knp.default.").
func StagedKind(id PolicyID) (kind, name string) {
	name = strings.TrimPrefix(id.Name, StagedPrefix)
	switch {
	case id.Namespace == "":
		return v3.KindStagedGlobalNetworkPolicy, name
	case strings.HasPrefix(name, "knp.default."):
		return v3.KindStagedKubernetesNetworkPolicy, strings.TrimPrefix(name, "knp.default.")
	}
	return v3.KindStagedNetworkPolicy, name
}

// Namespace is the staged policy's namespace ("" for a global one).
func (s *StagedPolicy) Namespace() string { return s.Policy.GetNamespace() }

// Name is the name of the policy it stages.
func (s *StagedPolicy) Name() string { return s.Policy.GetName() }

// GetResourceVersion is the staged object's resourceVersion.
func (s *StagedPolicy) GetResourceVersion() string { return s.Policy.GetResourceVersion() }

// NewStaged converts a StagedNetworkPolicy or StagedGlobalNetworkPolicy
// (nil for a Delete, false for another kind). Staged Kubernetes policies
// need the Kubernetes conversion (felix/staged).
func NewStaged(r v3.Resource) (*StagedPolicy, bool) {
	switch r := r.(type) {
	case *v3.StagedNetworkPolicy:
		action, np := r.Enforced()
		if action == v3.StagedActionDelete {
			return nil, true
		}
		np.ResourceVersion = r.ResourceVersion
		np.Default()
		return &StagedPolicy{Kind: v3.KindStagedNetworkPolicy, Policy: np}, true
	case *v3.StagedGlobalNetworkPolicy:
		action, gnp := r.Enforced()
		if action == v3.StagedActionDelete {
			return nil, true
		}
		gnp.ResourceVersion = r.ResourceVersion
		gnp.Default()
		return &StagedPolicy{Kind: v3.KindStagedGlobalNetworkPolicy, Policy: gnp}, true
	}
	return nil, false
}
