package dataplane_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

// memberKernel is the fake kernel with IPSetMembers: member updates are
// applied to the fake directly (not counted as processes) unless fail is
// set; procs are the commands the driver ran.
type memberKernel struct {
	*fake.Kernel
	procs   []string
	updates [][]dataplane.IPSetMemberUpdate
	fail    error
}

func (m *memberKernel) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	m.procs = append(m.procs, strings.Join(append([]string{name}, args...), " "))
	return m.Kernel.Run(ctx, name, args, stdin)
}

func (m *memberKernel) UpdateIPSetMembers(ctx context.Context, ups []dataplane.IPSetMemberUpdate) error {
	m.updates = append(m.updates, ups)
	if m.fail != nil {
		return m.fail
	}
	var b strings.Builder
	for _, u := range ups {
		for _, d := range u.Del {
			fmt.Fprintf(&b, "del %s %s\n", u.Set, d)
		}
		for _, a := range u.Add {
			fmt.Fprintf(&b, "add %s %s\n", u.Set, a)
		}
	}
	_, err := m.Kernel.Run(ctx, "ipset", []string{"-exist", "restore"}, []byte(b.String()))
	return err
}

func netSet(name string, members ...string) rules.IPSetSpec {
	return rules.IPSetSpec{Name: name, Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(slices.Clone(members))}
}

// TestIPSetsInProcessOnlyForMembers: an apply that only changes members
// of sets the kernel has goes to the Runner's IPSetMembers, each set with
// its type and family, and runs no process; anything else (a set to
// create, more changes than netlink requests are worth, a member the
// Runner cannot write) is one ipset restore as before; a failed
// in-process update is a failed apply that drops the cache.
func TestIPSetsInProcessOnlyForMembers(t *testing.T) {
	ctx := context.Background()
	k := &memberKernel{Kernel: fake.NewKernel()}
	s := dataplane.NewIPSets(k)
	step := func(name string, specs []rules.IPSetSpec, wantProcs []string, wantInProcess int) {
		t.Helper()
		k.procs, k.updates = nil, nil
		s.SetDesired(specs)
		if _, err := s.ApplyUpdates(ctx); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !slices.Equal(k.procs, wantProcs) || len(k.updates) != wantInProcess {
			t.Errorf("%s: ran %q and %d in-process updates; want %q and %d", name, k.procs, len(k.updates), wantProcs, wantInProcess)
		}
		for _, sp := range specs {
			var want []string
			for m := range sp.Members.All() {
				want = append(want, strings.TrimSuffix(m, "/32"))
			}
			slices.Sort(want)
			if got := k.Members(sp.Name); !slices.Equal(got, want) {
				t.Errorf("%s: %s holds %q, want %q", name, sp.Name, got, want)
			}
		}
	}
	restore := []string{"ipset -exist restore"}
	step("create", []rules.IPSetSpec{netSet("cali40a", "10.0.0.1"), netSet("cali40b", "10.0.1.1")}, []string{"ipset save", "ipset -exist restore"}, 0)
	step("members", []rules.IPSetSpec{netSet("cali40a", "10.0.0.2"), netSet("cali40b", "10.0.1.1", "10.0.1.2")}, nil, 1)
	if got := k.updates; len(got) != 1 || len(got[0]) != 2 || got[0][0].Set != "cali40a" || got[0][0].Type != calc.HashNet ||
		got[0][0].Family != "inet" || !slices.Equal(got[0][0].Del, []string{"10.0.0.1"}) || !slices.Equal(got[0][0].Add, []string{"10.0.0.2"}) {
		t.Errorf("in-process update %+v", got)
	}
	step("members and a new set", []rules.IPSetSpec{netSet("cali40a", "10.0.0.3"), netSet("cali40b", "10.0.1.1"), netSet("cali40c", "10.0.2.1")}, restore, 0)

	var many []string
	for i := range 5000 {
		many = append(many, fmt.Sprintf("10.1.%d.%d", i/250, i%250+1))
	}
	step("a big set", []rules.IPSetSpec{netSet("cali40a", many[:3000]...), netSet("cali40b"), netSet("cali40c")}, restore, 0)
	step("201 changes", []rules.IPSetSpec{netSet("cali40a", many[:3201]...), netSet("cali40b"), netSet("cali40c")}, restore, 0)
	step("200 changes", []rules.IPSetSpec{netSet("cali40a", many[:3401]...), netSet("cali40b"), netSet("cali40c")}, nil, 1)

	k.fail = fmt.Errorf("cannot: %w", dataplane.ErrMembersUnsupported)
	step("unsupported", []rules.IPSetSpec{netSet("cali40a", many[:3401]...), netSet("cali40b", "10.0.1.9"), netSet("cali40c")}, restore, 1)

	// A failed in-process update (the kernel may hold part of it) is
	// followed, in the same apply, by a read of the kernel and a restore
	// of what it then lacks.
	k.fail = errors.New("netlink: no such file or directory")
	k.procs = nil
	s.SetDesired([]rules.IPSetSpec{netSet("cali40a", many[:3401]...), netSet("cali40b"), netSet("cali40c", "10.0.2.2")})
	if _, err := s.ApplyUpdates(ctx); err != nil || !slices.Equal(k.procs, []string{"ipset save", "ipset -exist restore"}) {
		t.Fatalf("failed in-process update: %v, ran %q; want a read and a restore", err, k.procs)
	}
	if got := k.Members("cali40c"); !slices.Equal(got, []string{"10.0.2.2"}) {
		t.Fatalf("after the repair cali40c holds %q", got)
	}
	k.fail = nil
	step("after a failure", []rules.IPSetSpec{netSet("cali40a", many[:3401]...), netSet("cali40b"), netSet("cali40c", "10.0.2.3")}, nil, 1)
}
