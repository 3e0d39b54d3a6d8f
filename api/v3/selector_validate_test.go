package v3

import (
	"strings"
	"testing"
)

// TestValidateSelectorWhitespace checks that validation applies Calico's
// selector rules to the field as written: only spaces and tabs count as
// whitespace, so a selector that is empty apart from a newline (as a YAML
// block scalar can leave) is refused, as Calico's validator refuses it.
func TestValidateSelectorWhitespace(t *testing.T) {
	tests := []struct {
		sel     string
		wantErr bool
	}{
		{"", false},
		{" \t", false},
		{"has(a)", false},
		{"a notin {'x'}", false},
		{"\n", true},
		{"has(a)\n", true},
		{"a == 'x'\r\n&& b == 'y'", true},
		{"has (a)", true},
		{"has(" + strings.Repeat("k", 513) + ")", true},
	}
	for _, tc := range tests {
		t.Run(tc.sel, func(t *testing.T) {
			errs := validateSelector(Path("spec.selector"), tc.sel)
			if got := len(errs) > 0; got != tc.wantErr {
				t.Errorf("validateSelector(%q) = %v, want error: %v", tc.sel, errs, tc.wantErr)
			}
		})
	}
}
