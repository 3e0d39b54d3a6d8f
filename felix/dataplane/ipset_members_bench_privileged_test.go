//go:build privileged

package dataplane_test

import (
	"context"
	"fmt"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// restoreOnly is a Runner without IPSetMembers: every ipset change is an
// ipset restore process, as before the netlink path.
type restoreOnly struct{ dataplane.Runner }

// cpuSoFar is the CPU time (user + system) of this process and of its
// waited-for children (the ipset processes).
func cpuSoFar() time.Duration {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + children.Utime.Nano() + children.Stime.Nano())
}

// BenchmarkPrivilegedIPSetMemberChange: the renderer's member change of
// one set (a remote endpoint coming or going, n members at a time)
// applied by IPSets through netlink (ExecRunner's IPSetMembers) and
// through an ipset restore process, into a hash:net set already holding
// 150,000 members (the scale target's cluster). Reports the median wall
// time and the CPU time (this process and its children) per apply.
//
// Run: go test -tags privileged -run '^$' -bench IPSetMemberChange -benchtime 2000x ./felix/dataplane/
func BenchmarkPrivilegedIPSetMemberChange(b *testing.B) {
	ctx := context.Background()
	const set = "cali40s:bench"
	var base []string
	for i := range 150000 {
		base = append(base, fmt.Sprintf("10.%d.%d.%d/32", 64+i/65536, (i/256)%256, i%256))
	}
	for _, n := range []int{1, 10, 100, 1000} {
		var extra []string
		for i := range n {
			extra = append(extra, fmt.Sprintf("10.250.%d.%d/32", i/250, i%250+1))
		}
		for _, path := range []string{"netlink", "restore"} {
			b.Run(fmt.Sprintf("members=%d/%s", n, path), func(b *testing.B) {
				var r dataplane.Runner = dataplane.ExecRunner{NetnsPath: netnstest.New(b).Path()}
				if path == "restore" {
					r = restoreOnly{r}
				}
				s := dataplane.NewIPSets(r)
				spec := func(members []string) []rules.IPSetSpec {
					return []rules.IPSetSpec{{Name: set, Type: calc.HashNet, Family: "inet", Members: calc.SortedMembers(slices.Clone(members))}}
				}
				with := append(base[:len(base):len(base)], extra...)
				v := uint64(1)
				s.Update(spec(base), map[string]uint64{set: v}, nil)
				if _, err := s.ApplyUpdates(ctx); err != nil {
					b.Fatal(err)
				}
				var walls []time.Duration
				cpu0 := cpuSoFar()
				for b.Loop() {
					v++
					ch := rules.IPSetChange{Since: v - 1, Added: extra}
					members := with
					if v%2 == 1 {
						ch = rules.IPSetChange{Since: v - 1, Removed: extra}
						members = base
					}
					start := time.Now()
					s.Update(spec(members), map[string]uint64{set: v}, map[string]rules.IPSetChange{set: ch})
					if n, err := s.ApplyUpdates(ctx); err != nil || n != 1 {
						b.Fatalf("apply: %d sets, %v", n, err)
					}
					walls = append(walls, time.Since(start))
				}
				cpu := cpuSoFar() - cpu0
				b.ReportMetric(median(walls).Seconds()*1e3, "p50-ms")
				b.ReportMetric(cpu.Seconds()*1e3/float64(len(walls)), "cpu-ms/apply")
			})
		}
	}
}
