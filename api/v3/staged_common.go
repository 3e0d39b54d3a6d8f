package v3

// StagedAction says what a staged policy would do to the policy it
// stages: Set it (create or replace), Delete it, or Learn/Ignore (used by
// Calico Enterprise's policy recommendation; stored as given).
// +kubebuilder:validation:Enum=Set;Delete;Learn;Ignore
type StagedAction string

// Values of StagedAction.
const (
	StagedActionSet    StagedAction = "Set"
	StagedActionDelete StagedAction = "Delete"
	StagedActionLearn  StagedAction = "Learn"
	StagedActionIgnore StagedAction = "Ignore"
)

// Staged policies (StagedGlobalNetworkPolicy, StagedNetworkPolicy,
// StagedKubernetesNetworkPolicy) are stored and served exactly as Calico
// stores them, and never enforced: felix does not watch these kinds.

// stgDefaultAction fills an empty stagedAction with Set, the default
// Calico's CRDs give it.
func stgDefaultAction(a *StagedAction) {
	if *a == "" {
		*a = StagedActionSet
	}
}

// stgCheckAction checks a stagedAction against Calico's CRD enum.
func stgCheckAction(p Path, a StagedAction, errs *ErrorList) {
	if a == "" {
		return
	}
	oneOf(p, string(a), errs, string(StagedActionSet), string(StagedActionDelete),
		string(StagedActionLearn), string(StagedActionIgnore))
}
