//go:build privileged

package dataplane_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// BenchmarkPrivilegedRestoreOneChain measures the cost of one restore that
// rewrites a single policy chain, by backend and by how full the table is
// (empty but for the chain, or the synthetic cluster's 3,000 chains), to
// show what a one-policy change costs at the kernel edge.
func BenchmarkPrivilegedRestoreOneChain(b *testing.B) {
	ctx := context.Background()
	res := calc.Compute(ct.Input(ct.Node, ct.Synthetic(1000, 500, 5000)))
	rs := rules.Render(rules.DefaultConfig(), res, 4)
	var target rules.Chain
	for _, c := range rs.Chains {
		if strings.HasPrefix(c.Name, rules.PrefixPolicyIn) {
			target = c
			break
		}
	}
	oneChain := func(variant int) string {
		var s strings.Builder
		fmt.Fprintf(&s, "*filter\n:%s - [0:0]\n", target.Name)
		for _, r := range target.Hashed() {
			fmt.Fprintf(&s, "-A %s %s\n", target.Name, r.Spec)
		}
		fmt.Fprintf(&s, "-A %s -p tcp --dport %d -j ACCEPT\nCOMMIT\n", target.Name, 10000+variant)
		return s.String()
	}
	for _, be := range []dataplane.Backend{dataplane.BackendNFTV4, dataplane.BackendLegacyV4} {
		for _, full := range []bool{false, true} {
			for _, args := range [][]string{{"--noflush", "--wait", "10"}, {"--noflush"}} {
				name := fmt.Sprintf("%s/full=%v/%s", be.Restore, full, strings.Join(args, " "))
				b.Run(name, func(b *testing.B) {
					n := netnstest.New(b)
					r := dataplane.ExecRunner{NetnsPath: n.Path()}
					if _, err := r.Run(ctx, "ipset", []string{"restore"}, []byte(rs.IPSetRestoreText())); err != nil {
						b.Fatal(err)
					}
					if full {
						if _, err := r.Run(ctx, be.Restore, []string{"--noflush"}, []byte(rs.RestoreText())); err != nil {
							b.Fatal(err)
						}
					}
					i := 0
					for b.Loop() {
						i++
						if _, err := r.Run(ctx, be.Restore, args, []byte(oneChain(i%2))); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		}
	}
	b.Run("netns-true", func(b *testing.B) {
		n := netnstest.New(b)
		r := dataplane.ExecRunner{NetnsPath: n.Path()}
		for b.Loop() {
			if _, err := r.Run(ctx, "true", nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}
