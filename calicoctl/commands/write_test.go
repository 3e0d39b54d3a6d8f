package commands

import (
	"bytes"
	"errors"
	"testing"
)

// TestReport: each verb's outcome in Calico's words, for every mix of
// successes and failures.
func TestReport(t *testing.T) {
	e1, e2 := errors.New("e1"), errors.New("e2")
	for _, c := range []struct {
		verb         string
		r            writeResults
		out, errText string
	}{
		{"apply", writeResults{total: 2, handled: 2, kind: "IPPool"}, "Successfully applied 2 'IPPool' resource(s)\n", ""},
		{"create", writeResults{total: 1, errs: []error{e1}, kind: "IPPool"}, "", "failed to create 'IPPool' resource: [e1]"},
		{"create", writeResults{total: 2, errs: []error{e1, e2}}, "", "failed to create any resources: [e1 e2]"},
		{"apply", writeResults{total: 2, handled: 1, errs: []error{e1}, kind: "IPPool"}, "", "hit error: [e1]"},
		{"apply", writeResults{total: 3, handled: 2, errs: []error{e1}}, "Partial success: applied the first 2 out of 3 resources:\n", "hit error: [e1]"},
		{"replace", writeResults{total: 3, handled: 2, errs: []error{e1}, kind: "Tier"}, "Partial success: replaced the first 2 out of 3 'Tier' resources:\n", "hit error: [e1]"},
		{"delete", writeResults{total: 3, handled: 1, errs: []error{e1, e2}}, "Successfully deleted 1 resource(s)\n", "Failed to delete resource: e1\nFailed to delete resource: e2\n"},
		{"delete", writeResults{total: 1, errs: []error{e1}, kind: "Node"}, "", "Failed to delete 'Node' resource: e1\n"},
		{"delete", writeResults{total: 2, handled: 2, kind: "Node"}, "Successfully deleted 2 'Node' resource(s)\n", ""},
	} {
		var out bytes.Buffer
		err := (&app{stdout: &out}).report(c.verb, c.r)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if out.String() != c.out || got != c.errText {
			t.Errorf("%s %+v: printed %q, error %q; want %q, %q", c.verb, c.r, out.String(), got, c.out, c.errText)
		}
	}
}
