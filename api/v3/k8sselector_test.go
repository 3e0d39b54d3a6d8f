package v3

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestK8sSelectorToCalico(t *testing.T) {
	for _, c := range []struct {
		sel  *metav1.LabelSelector
		pod  bool
		want string
	}{
		{nil, true, "projectcalico.org/orchestrator == 'k8s'"},
		{nil, false, ""},
		{&metav1.LabelSelector{}, false, "all()"},
		{&metav1.LabelSelector{MatchLabels: map[string]string{"b": "2", "a": "1"}, MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "c", Operator: metav1.LabelSelectorOpIn, Values: []string{"x", "y"}},
			{Key: "d", Operator: metav1.LabelSelectorOpDoesNotExist},
		}}, true, "projectcalico.org/orchestrator == 'k8s' && a == '1' && b == '2' && c in { 'x', 'y' } && ! has(d)"},
	} {
		got, err := K8sSelectorToCalico(c.sel, c.pod)
		if err != nil || got != c.want {
			t.Errorf("%+v: got %q, %v; want %q", c.sel, got, err, c.want)
		}
	}
	// An unknown operator is refused, never dropped (which would widen
	// the selector).
	_, err := K8sSelectorToCalico(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "a", Operator: metav1.LabelSelectorOpExists}, {Key: "b", Operator: "Near"},
	}}, true)
	var oe *K8sOperatorError
	if !errors.As(err, &oe) || oe.Index != 1 || oe.Operator != "Near" {
		t.Fatalf("got %v, want a K8sOperatorError for matchExpressions[1]", err)
	}
}
