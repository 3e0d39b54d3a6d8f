package dataplane

import (
	"context"
	"errors"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
)

// TestFillIPSetsRefusesBeforeWriting: a member the in-process fill cannot
// write is refused (ErrMembersUnsupported, naming it) before any socket
// is opened, so nothing was written: the namespace path here does not
// even exist. IPSets then writes the members by ipset restore
// (TestIPSetFillFailureFallsBackToRestore).
func TestFillIPSetsRefusesBeforeWriting(t *testing.T) {
	r := ExecRunner{NetnsPath: "/nonexistent/netns"}
	err := r.FillIPSets(context.Background(), []IPSetMemberUpdate{
		{Set: "cali40s:a", Type: calc.HashNet, Family: "inet", Add: []string{"10.0.0.1", "10.0.0.0/0"}},
	})
	if !errors.Is(err, ErrMembersUnsupported) {
		t.Fatalf("FillIPSets = %v, want an error wrapping ErrMembersUnsupported", err)
	}
}
