//go:build privileged

package dataplane_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// scriptKeeper is a processCounter that keeps the input of the last
// ipset restore.
type scriptKeeper struct {
	*processCounter
	last string
}

func (k *scriptKeeper) Run(ctx context.Context, name string, args []string, stdin []byte) ([]byte, error) {
	if name == "ipset" && len(stdin) > 0 {
		k.last = string(stdin)
	}
	return k.processCounter.Run(ctx, name, args, stdin)
}

// largeSets are new sets of every type and family, with more members in
// all than IPSets fills in-process from.
func largeSets() []rules.IPSetSpec {
	var net4, net6, port4, port6 []string
	for i := range 8000 {
		net4 = append(net4, fmt.Sprintf("10.%d.%d.%d/32", 64+i>>16, (i>>8)&255, i&255))
	}
	net4 = append(net4, "10.200.0.0/16", "192.168.7.0/24")
	for i := range 2000 {
		net6 = append(net6, fmt.Sprintf("fd00::%x/128", i+1))
		port4 = append(port4, fmt.Sprintf("10.1.%d.%d,%s:%d", i>>8, i&255, []string{"tcp", "udp", "sctp"}[i%3], 1000+i))
	}
	net6 = append(net6, "fd00:1::/64")
	for i := range 1000 {
		port6 = append(port6, fmt.Sprintf("fd00::%x,tcp:8080", i+1))
	}
	return []rules.IPSetSpec{
		{Name: "cali40s:bignet", Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(net4)},
		{Name: "cali60s:bignet", Type: calc.HashNet, Family: "inet6", Members: calc.SortedMembers(net6)},
		{Name: "cali40n:bigport", Type: calc.HashIPPort, Family: "inet", Members: calc.SortedMembers(port4)},
		{Name: "cali60n:bigport", Type: calc.HashIPPort, Family: "inet6", Members: calc.SortedMembers(port6)},
	}
}

// TestPrivilegedIPSetFillAsRestore: the sets an apply creates with many
// members (13,000 here) are created by one ipset restore and filled
// through netlink batches, and the kernel then holds exactly what an
// ipset restore of the same sets makes; a resync finds nothing to write.
func TestPrivilegedIPSetFillAsRestore(t *testing.T) {
	ctx := context.Background()
	specs := largeSets()
	ref := dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}
	rs := dataplane.NewIPSets(restoreOnly{ref})
	rs.SetDesired(specs)
	if _, err := rs.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	want := ipsetSave(t, ref)

	r := &scriptKeeper{processCounter: &processCounter{ExecRunner: dataplane.ExecRunner{NetnsPath: netnstest.New(t).Path()}}}
	s := dataplane.NewIPSets(r)
	s.SetDesired(specs)
	n0 := r.count()
	if _, err := s.ApplyUpdates(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := r.since(n0); len(calls) != 2 || !strings.HasPrefix(calls[1], "ipset -exist restore") {
		t.Fatalf("processes run: %q; want ipset save, then one restore (the creates)", calls)
	}
	if strings.Contains(r.last, "add ") || strings.Count(r.last, "create ") != 4 {
		t.Fatalf("the restore wrote more than the 4 creates:\n%.500s", r.last)
	}
	if got := ipsetSave(t, r.processCounter); got != want {
		t.Fatalf("filled in-process, the kernel holds (%d lines)\n%.2000s\nwhere a restore makes (%d lines)\n%.2000s",
			strings.Count(got, "\n"), got, strings.Count(want, "\n"), want)
	}
	if !strings.Contains(want, "add cali40n:bigport 10.1.0.1,udp:1001") || !strings.Contains(want, "add cali40s:bignet 10.200.0.0/16") {
		t.Fatalf("reference lacks members:\n%.1000s", want)
	}
	s.InvalidateCache()
	if n, err := s.ApplyUpdates(ctx); err != nil || n != 0 {
		t.Fatalf("resync after the fill wrote %d sets (%v), want none", n, err)
	}
}

// BenchmarkPrivilegedIPSetFill: an apply creating sets with 300,000
// members in all (as felix's first apply at 150,000 endpoints: a
// named-port set of every endpoint and hash:net sets), filled in netlink
// batches (ExecRunner's IPSetFiller) and by one ipset restore.
func BenchmarkPrivilegedIPSetFill(b *testing.B) {
	var port []string
	nets := make([][]string, 50)
	for i := range 150_000 {
		ip := fmt.Sprintf("10.%d.%d.%d", 64+i>>16, (i>>8)&255, i&255)
		port = append(port, ip+",tcp:8080")
		nets[i%50] = append(nets[i%50], ip+"/32")
	}
	specs := []rules.IPSetSpec{{Name: "cali40n:bigport", Type: calc.HashIPPort, Family: "inet", Members: calc.SortedMembers(port)}}
	for i, n := range nets {
		specs = append(specs, rules.IPSetSpec{Name: fmt.Sprintf("cali40s:net%d", i), Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(n)})
	}
	for _, tc := range []struct {
		name string
		wrap func(dataplane.ExecRunner) dataplane.Runner
	}{
		{"netlink", func(r dataplane.ExecRunner) dataplane.Runner { return r }},
		{"restore", func(r dataplane.ExecRunner) dataplane.Runner { return restoreOnly{r} }},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				b.StopTimer()
				s := dataplane.NewIPSets(tc.wrap(dataplane.ExecRunner{NetnsPath: netnstest.New(b).Path()}))
				s.SetDesired(specs)
				b.StartTimer()
				if _, err := s.ApplyUpdates(context.Background()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
