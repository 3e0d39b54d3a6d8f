package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// brokenFiller is the fake kernel with an IPSetFiller that always fails.
type brokenFiller struct {
	*fake.Kernel
	calls int
}

func (b *brokenFiller) FillIPSets(context.Context, []dataplane.IPSetMemberUpdate) error {
	b.calls++
	return errors.New("netlink socket gone")
}

// TestIPSetFillFailureFallsBackToRestore: when the in-process fill of new
// sets fails, their members are written by ipset restore instead: the
// kernel ends up with every member.
func TestIPSetFillFailureFallsBackToRestore(t *testing.T) {
	var members []string
	for i := range 12_000 {
		members = append(members, fmt.Sprintf("10.%d.%d.%d", 64+i>>16, (i>>8)&255, i&255))
	}
	k := &brokenFiller{Kernel: fake.NewKernel()}
	s := dataplane.NewIPSets(k)
	s.SetDesired([]rules.IPSetSpec{{Name: "cali40s:big", Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(slices.Clone(members))}})
	if _, err := s.ApplyUpdates(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k.calls != 1 {
		t.Fatalf("filler called %d times, want 1", k.calls)
	}
	if got := k.Members("cali40s:big"); !slices.Equal(got, calc.SortedMembers(members).Slice()) {
		t.Fatalf("the kernel holds %d members, want %d", len(got), len(members))
	}
}
