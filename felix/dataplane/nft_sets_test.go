package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/google/nftables"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

func unitKeys(u map[string]nftUnit) []string { return slices.Sorted(maps.Keys(u)) }

// TestNftUnitsMergeOverlaps: networks inside others add no element,
// adjacent hosts stay one interval each, a /0 is one open interval.
func TestNftUnitsMergeOverlaps(t *testing.T) {
	for _, tc := range []struct {
		members []string
		want    int
	}{
		{[]string{"10.0.0.0/8", "10.1.0.0/16", "10.2.3.4"}, 1},
		{[]string{"10.0.0.1", "10.0.0.2", "10.0.0.3/32"}, 3},
		{[]string{"0.0.0.0/0", "192.168.0.0/16"}, 1},
		{[]string{"10.0.0.0/24", "10.0.1.0/24"}, 2},
		{[]string{"fd00::/64", "fd00::1", "::/0"}, 1},
	} {
		got, err := nftUnits(calc.HashNet, calc.SortedMembers(tc.members))
		if err != nil || len(got) != tc.want {
			t.Errorf("%v: %d units (%v), want %d", tc.members, len(got), err, tc.want)
		}
	}
	u, _ := nftUnits(calc.HashNet, calc.Members("0.0.0.0/0"))
	for _, x := range u {
		if x.end != nil || len(x.elements()) != 1 {
			t.Errorf("/0: %+v", x)
		}
	}
}

// TestNftPatchUnitsAsFromScratch: a patched host set equals the units of
// its new member list; a network in the change or the set refuses the
// patch.
func TestNftPatchUnitsAsFromScratch(t *testing.T) {
	old := calc.Members("10.0.0.1", "10.0.0.2", "10.0.0.5")
	units, _ := nftUnits(calc.HashNet, old)
	del, add, ok := patchUnits(calc.HashNet, allHosts(calc.HashNet, old), units,
		rules.IPSetChange{Added: []string{"10.0.0.3"}, Removed: []string{"10.0.0.5"}})
	if !ok || len(del) != 2 || len(add) != 2 {
		t.Fatalf("patch: ok %v, %d deleted, %d added elements", ok, len(del), len(add))
	}
	want, _ := nftUnits(calc.HashNet, calc.Members("10.0.0.1", "10.0.0.2", "10.0.0.3"))
	if !slices.Equal(unitKeys(units), unitKeys(want)) {
		t.Errorf("patched units differ from the new list's")
	}
	if _, _, ok := patchUnits(calc.HashNet, true, units, rules.IPSetChange{Added: []string{"10.0.0.0/24"}}); ok {
		t.Error("a network patched into a host set")
	}
	if _, _, ok := patchUnits(calc.HashNet, false, units, rules.IPSetChange{Added: []string{"10.0.0.9"}}); ok {
		t.Error("a host patched into a set with networks")
	}
	if _, _, ok := patchUnits(calc.HashNet, true, units, rules.IPSetChange{Removed: []string{"10.0.0.9"}}); ok {
		t.Error("a member it does not have removed")
	}
	ip := calc.Members("10.0.0.1,tcp:80")
	pu, _ := nftUnits(calc.HashIPPort, ip)
	if _, add, ok := patchUnits(calc.HashIPPort, false, pu, rules.IPSetChange{Added: []string{"10.0.0.2,udp:53"}}); !ok || len(add) != 1 || len(pu) != 2 {
		t.Errorf("ip,port patch: ok %v, %d added, %d units", ok, len(add), len(pu))
	}
}

// TestNftInChunksKeepsIntervals: chunks are bounded and never separate
// an interval's end from its start.
func TestNftInChunksKeepsIntervals(t *testing.T) {
	var members []string
	for i := range 3000 {
		members = append(members, fmt.Sprintf("10.%d.%d.1", i/256, i%256))
	}
	units, err := nftUnits(calc.HashNet, calc.SortedMembers(members))
	if err != nil {
		t.Fatal(err)
	}
	all := allElements(units)
	total := 0
	if err := inChunks(all, func(c []nftables.SetElement) error {
		if len(c) > nftElemChunk+1 || c[0].IntervalEnd {
			t.Errorf("chunk of %d starting with an interval end %v", len(c), c[0].IntervalEnd)
		}
		total += len(c)
		return nil
	}); err != nil || total != len(all) {
		t.Errorf("%d of %d elements, %v", total, len(all), err)
	}
}
