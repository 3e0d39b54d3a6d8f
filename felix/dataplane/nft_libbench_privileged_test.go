//go:build privileged

package dataplane_test

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
	"sigs.k8s.io/knftables"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// libBenchPolicies is the number of policy chains (and sets) of the
// library benchmark's table: the 1,000 policies.
const libBenchPolicies = 1000

// libBenchRuleset is an nft script with a calico-like table: one chain
// and one 20-member set per policy (10 rules each), 500 endpoint chains
// jumping to two policies each, and a FORWARD base chain dispatching
// through a verdict map on the input interface.
func libBenchRuleset() string {
	var b strings.Builder
	b.WriteString("table ip calico {\n")
	for p := range libBenchPolicies {
		fmt.Fprintf(&b, "set s%d { type ipv4_addr; flags interval; elements = { ", p)
		for m := range 20 {
			if m > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "10.%d.%d.%d", p/250, p%250, m+1)
		}
		b.WriteString(" } }\n")
	}
	for p := range libBenchPolicies {
		fmt.Fprintf(&b, "chain pi%d {\n", p)
		for r := range 10 {
			fmt.Fprintf(&b, "ip saddr @s%d tcp dport %d meta mark set mark or 0x10000 return\n", p, 1000+r)
		}
		b.WriteString("}\n")
	}
	for e := range 500 {
		fmt.Fprintf(&b, "chain tw%d { jump pi%d\njump pi%d\ndrop\n}\n", e, (2*e)%libBenchPolicies, (2*e+1)%libBenchPolicies)
	}
	b.WriteString("map fw-dispatch { type ifname : verdict; elements = { ")
	for e := range 500 {
		if e > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `"cali%04d" : goto tw%d`, e, e)
	}
	b.WriteString(" } }\n")
	b.WriteString("chain forward { type filter hook forward priority 0; policy accept; oifname vmap @fw-dispatch\n}\n}\n")
	return b.String()
}

// BenchmarkPrivilegedNftLibrary times one policy change (one chain of 10
// rules flushed and rewritten in one transaction) in a table holding
// 1,000 policies' chains and sets, through knftables (which runs `nft`)
// and through google/nftables (netlink, no process), side by side in one
// fresh namespace. It reports the median of each.
//
// Run: go test -tags privileged -run '^$' -bench NftLibrary -benchtime 100x ./felix/dataplane/
func BenchmarkPrivilegedNftLibrary(b *testing.B) {
	n := netnstest.New(b)
	if err := n.Do(func(ns.NetNS) error {
		return runNftScript(libBenchRuleset())
	}); err != nil {
		b.Fatalf("loading the table: %v", err)
	}
	kn := knftablesChange(b, n)
	gn := googleChange(b, n)
	var kt, gt []time.Duration
	b.ResetTimer()
	for i := range b.N {
		t0 := time.Now()
		kn(i)
		kt = append(kt, time.Since(t0))
		t0 = time.Now()
		gn(i)
		gt = append(gt, time.Since(t0))
	}
	b.StopTimer()
	b.ReportMetric(float64(median(kt).Microseconds())/1000, "knftables-ms")
	b.ReportMetric(float64(median(gt).Microseconds())/1000, "google-ms")
	b.ReportMetric(0, "ns/op")
}

func runNftScript(script string) error {
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f: %w: %s", err, out)
	}
	return nil
}

// knftablesChange returns a function making the i-th change through
// knftables, its `nft` child started from a thread in n.
func knftablesChange(b *testing.B, n ns.NetNS) func(int) {
	var nft knftables.Interface
	if err := n.Do(func(ns.NetNS) (err error) {
		nft, err = knftables.New(knftables.IPv4Family, "calico")
		return err
	}); err != nil {
		b.Fatalf("knftables: %v", err)
	}
	return func(i int) {
		tx := nft.NewTransaction()
		chain := fmt.Sprintf("pi%d", (2*i)%libBenchPolicies)
		tx.Flush(&knftables.Chain{Name: chain})
		for r := range 10 {
			tx.Add(&knftables.Rule{Chain: chain, Rule: fmt.Sprintf(
				"ip saddr @s%d tcp dport %d meta mark set mark or 0x10000 return", (2*i)%libBenchPolicies, 2000+r+i%7)})
		}
		if err := n.Do(func(ns.NetNS) error { return nft.Run(context.Background(), tx) }); err != nil {
			b.Fatalf("knftables run: %v", err)
		}
	}
}

// googleChange returns a function making the i-th change through
// google/nftables over a netlink socket opened in n.
func googleChange(b *testing.B, n ns.NetNS) func(int) {
	fd, err := unix.Open(n.Path(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { unix.Close(fd) })
	c, err := nftables.New(nftables.WithNetNSFd(fd), nftables.AsLasting())
	if err != nil {
		b.Fatal(err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: "calico"}
	sets := map[int]*nftables.Set{}
	for p := 0; p < libBenchPolicies; p += 2 {
		s, err := c.GetSetByName(table, fmt.Sprintf("s%d", p))
		if err != nil {
			b.Fatalf("set s%d: %v", p, err)
		}
		sets[p] = s
	}
	return func(i int) {
		p := (2*i + 1) % libBenchPolicies
		p -= p % 2
		chain := &nftables.Chain{Name: fmt.Sprintf("pi%d", p+1), Table: table}
		c.FlushChain(chain)
		for r := range 10 {
			c.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: saddrPortReturn(sets[p], uint16(2000+r+i%7))})
		}
		if err := c.Flush(); err != nil {
			b.Fatalf("google/nftables flush: %v", err)
		}
	}
}

// saddrPortReturn is `ip saddr @set tcp dport port meta mark set mark or
// 0x10000 return` as expressions.
func saddrPortReturn(set *nftables.Set, port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: []byte{0xff, 0xff, 0xff, 0xff}, Xor: binaryutil.NativeEndian.PutUint32(0x10000)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
		&expr.Verdict{Kind: expr.VerdictReturn},
	}
}
