package v3

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestCalicoNodeStatusValidation: one case per rule of Calico's
// validate tags on CalicoNodeStatusSpec (node required,name; classes
// required,unique plus the CRD enum; updatePeriodSeconds
// required,gte=0,lte=86400).
func TestCalicoNodeStatusValidation(t *testing.T) {
	period := func(v uint32) *uint32 { return &v }
	ok := CalicoNodeStatusSpec{Node: "node-1", Classes: []NodeStatusClassType{"Agent", "BGP", "Routes"}, UpdatePeriodSeconds: period(86400)}
	tests := []struct {
		name string
		edit func(s *CalicoNodeStatusSpec)
		want string
	}{
		{"valid", func(*CalicoNodeStatusSpec) {}, ""},
		{"period 0 stops updates", func(s *CalicoNodeStatusSpec) { s.UpdatePeriodSeconds = period(0) }, ""},
		{"no node", func(s *CalicoNodeStatusSpec) { s.Node = "" }, "spec.node: is required"},
		{"bad node name", func(s *CalicoNodeStatusSpec) { s.Node = "Node_1" }, `spec.node: "Node_1" is not a valid name`},
		{"no classes", func(s *CalicoNodeStatusSpec) { s.Classes = nil }, "spec.classes: is required"},
		{"unknown class", func(s *CalicoNodeStatusSpec) { s.Classes = []NodeStatusClassType{"Felix"} }, `spec.classes[0]: "Felix" is not one of Agent, BGP, Routes`},
		{"repeated class", func(s *CalicoNodeStatusSpec) { s.Classes = []NodeStatusClassType{"BGP", "BGP"} }, `spec.classes[1]: "BGP" is listed twice`},
		{"no period", func(s *CalicoNodeStatusSpec) { s.UpdatePeriodSeconds = nil }, "spec.updatePeriodSeconds: is required"},
		{"period over a day", func(s *CalicoNodeStatusSpec) { s.UpdatePeriodSeconds = period(86401) }, "spec.updatePeriodSeconds: 86401 is more than 86400"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := &CalicoNodeStatus{ObjectMeta: metav1.ObjectMeta{Name: "st"}, Spec: *ok.DeepCopy()}
			tc.edit(&s.Spec)
			err := DefaultAndValidate(s)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted; want error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

// TestFelixConfigurationNodeSelector: Calico's rule that only a
// selector-scoped FelixConfiguration (neither "default" nor "node.*") may
// set nodeSelector, even to "".
func TestFelixConfigurationNodeSelector(t *testing.T) {
	str := func(s string) *string { return &s }
	tests := []struct {
		sel     *string
		objName string
		want    string
	}{
		{objName: "gpu", sel: str("has(gpu)")},
		{objName: "gpu", sel: nil},
		{objName: "default", sel: nil},
		{objName: "default", sel: str("has(gpu)"), want: "spec.nodeSelector: nodeSelector must not be set on the 'default' or per-node ('node.*') FelixConfiguration"},
		{objName: "default", sel: str(""), want: "spec.nodeSelector: nodeSelector must not be set"},
		{objName: "node.worker-1", sel: str("has(gpu)"), want: "spec.nodeSelector: nodeSelector must not be set"},
		{objName: "gpu", sel: str("has (gpu)"), want: "spec.nodeSelector: invalid selector"},
		{objName: "gpu", sel: str("has(" + strings.Repeat("k", 1100) + ")"), want: "spec.nodeSelector: selector is 1105 characters long"},
	}
	for _, tc := range tests {
		sel := "<nil>"
		if tc.sel != nil {
			sel = *tc.sel
		}
		t.Run(tc.objName+" "+sel[:min(len(sel), 20)], func(t *testing.T) {
			fc := &FelixConfiguration{ObjectMeta: metav1.ObjectMeta{Name: tc.objName}, Spec: FelixConfigurationSpec{NodeSelector: tc.sel}}
			err := DefaultAndValidate(fc)
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("want valid, got %v", err)
			case tc.want != "" && err == nil:
				t.Errorf("accepted; want error containing %q", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}
