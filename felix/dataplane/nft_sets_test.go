package dataplane

import (
	"fmt"
	"slices"
	"testing"

	"github.com/google/nftables"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

func unitKeys(u nftUnitMap) []string {
	var out []string
	for k := range u {
		out = append(out, fmt.Sprintf("%x|%x", k.start[:k.ns], k.end[:k.ne]))
	}
	slices.Sort(out)
	return out
}

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
		got, _, err := nftUnits(calc.SortedMembers(tc.members))
		if err != nil || len(got) != tc.want {
			t.Errorf("%v: %d units (%v), want %d", tc.members, len(got), err, tc.want)
		}
	}
	u, _, _ := nftUnits(calc.Members("0.0.0.0/0"))
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
	units, hostsOnly, _ := nftUnits(old)
	del, add, ok := patchUnits(hostsOnly, units,
		rules.IPSetChange{Added: []string{"10.0.0.3"}, Removed: []string{"10.0.0.5"}})
	if !ok || len(del) != 2 || len(add) != 2 {
		t.Fatalf("patch: ok %v, %d deleted, %d added elements", ok, len(del), len(add))
	}
	want, _, _ := nftUnits(calc.Members("10.0.0.1", "10.0.0.2", "10.0.0.3"))
	if !slices.Equal(unitKeys(units), unitKeys(want)) {
		t.Errorf("patched units differ from the new list's")
	}
	if _, _, ok := patchUnits(true, units, rules.IPSetChange{Added: []string{"10.0.0.0/24"}}); ok {
		t.Error("a network patched into a host set")
	}
	if _, _, ok := patchUnits(false, units, rules.IPSetChange{Added: []string{"10.0.0.9"}}); ok {
		t.Error("a host patched into a set with networks")
	}
	if _, _, ok := patchUnits(true, units, rules.IPSetChange{Removed: []string{"10.0.0.9"}}); ok {
		t.Error("a member it does not have removed")
	}
}

// TestNftChunksKeepIntervals: chunks are bounded and never separate an
// interval's end from its start; a host set's chunks are its members.
func TestNftChunksKeepIntervals(t *testing.T) {
	var members []string
	for i := range 3000 {
		members = append(members, fmt.Sprintf("10.%d.%d.1", i/256, i%256))
	}
	list := calc.SortedMembers(members)
	units, hostsOnly, err := nftUnits(list)
	if err != nil {
		t.Fatal(err)
	}
	if !hostsOnly || !allHosts(list) {
		t.Error("a set of hosts not seen as hosts only")
	}
	check := func(name string, want int, ends bool, chunks func(func([]nftables.SetElement) error) error) {
		total, nEnds := 0, 0
		if err := chunks(func(c []nftables.SetElement) error {
			if len(c) > nftElemChunk+1 || c[0].IntervalEnd {
				t.Errorf("%s: chunk of %d starting with an end %v", name, len(c), c[0].IntervalEnd)
			}
			for _, e := range c {
				if e.IntervalEnd {
					nEnds++
				}
			}
			total += len(c)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if total != want || (nEnds > 0) != ends {
			t.Errorf("%s: %d elements (%d ends), want %d", name, total, nEnds, want)
		}
	}
	check("interval set", 2*len(members), true, func(f func([]nftables.SetElement) error) error { return unitChunks(units, f) })
	check("host set", len(members), false, func(f func([]nftables.SetElement) error) error { return plainChunks(list, hostElement, f) })
	check("inChunks", 2*len(members), true, func(f func([]nftables.SetElement) error) error {
		var all []nftables.SetElement
		_ = unitChunks(units, func(c []nftables.SetElement) error { all = append(all, c...); return nil })
		return inChunks(all, f)
	})
}

// TestNftHostSetChange: a plain (host) set's change from the renderer's exact
// change or, without one, from comparing the lists: the same elements;
// a network asks for an interval set.
func TestNftHostSetChange(t *testing.T) {
	old := calc.Members("10.0.0.1", "10.0.0.2", "10.0.0.5")
	next := calc.Members("10.0.0.1", "10.0.0.2", "10.0.0.3")
	ch := rules.IPSetChange{Added: []string{"10.0.0.3"}, Removed: []string{"10.0.0.5"}}
	keys := func(es []nftables.SetElement) []string {
		var out []string
		for _, e := range es {
			out = append(out, fmt.Sprint(e.Key))
		}
		slices.Sort(out)
		return out
	}
	for _, exact := range []bool{true, false} {
		del, add, ok := plainSetChange(old, next, hostElement, ch, exact)
		if !ok || !slices.Equal(keys(del), []string{"[10 0 0 5]"}) || !slices.Equal(keys(add), []string{"[10 0 0 3]"}) {
			t.Errorf("exact %v: ok %v, del %v, add %v", exact, ok, keys(del), keys(add))
		}
	}
	// A change that does not fit the old list is not trusted.
	if del, add, ok := plainSetChange(old, next, hostElement, rules.IPSetChange{Removed: []string{"10.0.0.9"}}, true); !ok || len(del) != 1 || len(add) != 1 {
		t.Errorf("a misfit change: ok %v, %d deleted, %d added", ok, len(del), len(add))
	}
	if _, _, ok := plainSetChange(old, calc.Members("10.0.0.1", "10.1.0.0/16"), hostElement, rules.IPSetChange{}, false); ok {
		t.Error("a network went into a host set")
	}
	ipPorts := calc.Members("10.0.0.1,tcp:80", "10.0.0.2,udp:53")
	del, add, ok := plainSetChange(ipPorts, calc.Members("10.0.0.1,tcp:80", "10.0.0.3,tcp:8080"), ipPortElement,
		rules.IPSetChange{Added: []string{"10.0.0.3,tcp:8080"}, Removed: []string{"10.0.0.2,udp:53"}}, true)
	if !ok || len(del) != 1 || len(add) != 1 {
		t.Errorf("ip,port change: ok %v, %d deleted, %d added", ok, len(del), len(add))
	}
	if _, _, ok := plainSetChange(ipPorts, calc.Members("10.0.0.1,bogus"), ipPortElement, rules.IPSetChange{}, false); ok {
		t.Error("a malformed ip,port member accepted")
	}
	withNet := calc.Members("10.0.0.1", "10.0.0.2", "10.0.0.5", "10.2.0.0/16")
	if _, _, ok := plainSetChange(old, withNet, hostElement, rules.IPSetChange{Added: []string{"10.2.0.0/16"}}, true); ok {
		t.Error("a network patched into a host set")
	}
}
