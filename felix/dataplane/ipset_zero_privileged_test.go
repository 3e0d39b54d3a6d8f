//go:build privileged

package dataplane_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedZeroNetworkEveryWritePath: 0.0.0.0/0 and ::/0, which the
// kernel's hash:net sets refuse, reach the kernel as their /1 halves on
// every write path: a large new set filled in-process (netlink batches),
// member patches in-process (netlink add/del: the /0 going while one of
// its /1s stays a member of its own, and coming back), and ipset restore
// (the reference, restoredFresh).
func TestPrivilegedZeroNetworkEveryWritePath(t *testing.T) {
	ctx := context.Background()
	r := &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}
	s := dataplane.NewIPSets(r)
	many := make([]string, 0, 10_001)
	for i := range 10_000 {
		many = append(many, fmt.Sprintf("10.%d.%d.%d/32", i/62500, i/250%250, i%250+1))
	}
	specs := func(v4, v6 []string) []rules.IPSetSpec {
		return []rules.IPSetSpec{
			{Name: "cali40s:zero", Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(slices.Clone(v4))},
			{Name: "cali60s:zero", Type: calc.HashNet, Family: "inet6", Members: calc.SortedMembers(slices.Clone(v6))},
		}
	}
	versions := func(n uint64) map[string]uint64 { return map[string]uint64{"cali40s:zero": n, "cali60s:zero": n + 100} }
	check := func(step string, specs []rules.IPSetSpec, has, hasNot []string) {
		t.Helper()
		got := ipsetSave(t, r.ExecRunner)
		for _, m := range has {
			if !strings.Contains(got, m+"\n") && !strings.HasSuffix(got, m) {
				t.Errorf("%s: kernel lacks %q", step, m)
			}
		}
		for _, m := range append(hasNot, "/0\n") {
			if strings.Contains(got, m) {
				t.Errorf("%s: kernel holds %q", step, strings.TrimSpace(m))
			}
		}
		if want := restoredFresh(t, specs); got != want {
			t.Errorf("%s: kernel differs from a fresh restore of the same sets", step)
		}
	}

	// A start: sets created by a restore and filled in-process.
	v4, v6 := append(slices.Clone(many), "0.0.0.0/0"), []string{"::/0", "fd00::1/128"}
	s.Update(specs(v4, v6), versions(1), nil)
	before := r.count()
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := r.since(before); !slices.Equal(calls, []string{"ipset save", "ipset -exist restore"}) {
		t.Errorf("start ran %q; want one restore creating the sets (members filled in-process)", calls)
	}
	check("filled", specs(v4, v6),
		[]string{"add cali40s:zero 0.0.0.0/1", "add cali40s:zero 128.0.0.0/1", "add cali60s:zero ::/1", "add cali60s:zero 8000::/1"}, nil)

	// Patched in-process: 0.0.0.0/0 goes, 0.0.0.0/1 stays as a member of
	// its own; ::/0 goes.
	v4b := append(slices.Clone(many), "0.0.0.0/1")
	v6b := []string{"fd00::1/128"}
	s.Update(specs(v4b, v6b), versions(2), map[string]rules.IPSetChange{
		"cali40s:zero": {Since: 1, Added: []string{"0.0.0.0/1"}, Removed: []string{"0.0.0.0/0"}},
		"cali60s:zero": {Since: 101, Removed: []string{"::/0"}},
	})
	before = r.count()
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := r.since(before); len(calls) != 0 {
		t.Errorf("patch ran %q; want it in-process", calls)
	}
	check("patched out", specs(v4b, v6b), []string{"add cali40s:zero 0.0.0.0/1"},
		[]string{"128.0.0.0/1", "add cali60s:zero ::/1", "8000::/1"})

	// And back in.
	s.Update(specs(v4b, v6), map[string]uint64{"cali40s:zero": 2, "cali60s:zero": 103}, map[string]rules.IPSetChange{
		"cali60s:zero": {Since: 102, Added: []string{"::/0"}},
	})
	before = r.count()
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := r.since(before); len(calls) != 0 {
		t.Errorf("patch ran %q; want it in-process", calls)
	}
	check("patched in", specs(v4b, v6), []string{"add cali60s:zero ::/1", "add cali60s:zero 8000::/1"}, nil)
}
