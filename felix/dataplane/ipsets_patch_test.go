package dataplane_test

import (
	"context"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// TestIPSetPatchesThenReplaced: member changes patched into a set (not
// yet applied) and then superseded by a full member list before the
// apply (a renderer whose change no longer leads from what the driver
// holds) must not be lost: the kernel ends with the full list.
func TestIPSetPatchesThenReplaced(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	s := dataplane.NewIPSets(k)
	spec := func(members ...string) []rules.IPSetSpec {
		return []rules.IPSetSpec{{Name: "cali40s", Type: calc.HashNet, Family: "inet", Members: calc.Members(members...)}}
	}
	v := func(n uint64) map[string]uint64 { return map[string]uint64{"cali40s": n} }
	s.Update(spec("10.0.0.1"), v(1), nil)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	s.Update(spec("10.0.0.1", "10.0.0.2"), v(2), map[string]rules.IPSetChange{"cali40s": {Since: 1, Added: []string{"10.0.0.2"}}})
	s.Update(spec("10.0.0.1", "10.0.0.2", "10.0.0.3"), v(7), nil)
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	want := []string{"10.0.0.1", "10.0.0.2", "10.0.0.3"}
	if got := k.Members("cali40s"); !slices.Equal(got, want) {
		t.Fatalf("kernel holds %q, want %q", got, want)
	}
	// Patches applied as they come: an add then a remove of the same
	// member, and a remove then a re-add, leave the kernel right.
	s.Update(spec("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4"), v(8), map[string]rules.IPSetChange{"cali40s": {Since: 7, Added: []string{"10.0.0.4"}}})
	s.Update(spec("10.0.0.1", "10.0.0.2", "10.0.0.3"), v(9), map[string]rules.IPSetChange{"cali40s": {Since: 8, Removed: []string{"10.0.0.4"}}})
	s.Update(spec("10.0.0.2", "10.0.0.3"), v(10), map[string]rules.IPSetChange{"cali40s": {Since: 9, Removed: []string{"10.0.0.1"}}})
	s.Update(spec("10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5"), v(11), map[string]rules.IPSetChange{"cali40s": {Since: 10, Added: []string{"10.0.0.1", "10.0.0.5"}}})
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	want = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.5"}
	if got := k.Members("cali40s"); !slices.Equal(got, want) {
		t.Fatalf("kernel holds %q, want %q", got, want)
	}
}
