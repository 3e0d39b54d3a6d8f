package v3

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// K8sSelectorToCalico renders a Kubernetes label selector as Calico's
// converter does: matchLabels as ==, matchExpressions as in, not in, has
// and ! has, joined with &&. A pod selector also requires the Kubernetes
// orchestrator label; an empty namespace selector is all(); a nil one is
// "" (the policy's own namespace). An operator that is not one of the
// four is an error naming its index (Calico's converter drops the term,
// which would widen the selector; Kubernetes refuses such a selector).
func K8sSelectorToCalico(s *metav1.LabelSelector, pod bool) (string, error) {
	var terms []string
	if pod {
		terms = append(terms, "projectcalico.org/orchestrator == 'k8s'")
	}
	if s == nil {
		return strings.Join(terms, " && "), nil
	}
	if !pod && len(s.MatchLabels) == 0 && len(s.MatchExpressions) == 0 {
		return "all()", nil
	}
	keys := make([]string, 0, len(s.MatchLabels))
	for k := range s.MatchLabels {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		terms = append(terms, fmt.Sprintf("%s == '%s'", k, s.MatchLabels[k]))
	}
	for i, e := range s.MatchExpressions {
		values := strings.Join(e.Values, "', '")
		switch e.Operator {
		case metav1.LabelSelectorOpIn:
			terms = append(terms, fmt.Sprintf("%s in { '%s' }", e.Key, values))
		case metav1.LabelSelectorOpNotIn:
			terms = append(terms, fmt.Sprintf("%s not in { '%s' }", e.Key, values))
		case metav1.LabelSelectorOpExists:
			terms = append(terms, fmt.Sprintf("has(%s)", e.Key))
		case metav1.LabelSelectorOpDoesNotExist:
			terms = append(terms, fmt.Sprintf("! has(%s)", e.Key))
		default:
			return "", &K8sOperatorError{Index: i, Operator: string(e.Operator)}
		}
	}
	return strings.Join(terms, " && "), nil
}

// K8sOperatorError is a matchExpressions operator Kubernetes does not have.
type K8sOperatorError struct {
	Index    int
	Operator string
}

func (e *K8sOperatorError) Error() string {
	return fmt.Sprintf("matchExpressions[%d].operator: %q is not one of In, NotIn, Exists, DoesNotExist", e.Index, e.Operator)
}
