//go:build privileged

package dataplane_test

import (
	"context"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedNftDriftRepairedForeignKept: the nftables driver
// programs both families in one transaction; a resync repairs a chain
// and a set someone else changed; tables it does not own (kube-proxy's)
// are never touched, by an apply or by CleanupNftables, which removes
// felix's tables only.
func TestPrivilegedNftDriftRepairedForeignKept(t *testing.T) {
	n := netnstest.New(t)
	run := dataplane.ExecRunner{NetnsPath: n.Path()}
	nft := func(args ...string) string {
		t.Helper()
		out, err := run.Run(context.Background(), "nft", args, nil)
		if err != nil {
			t.Fatalf("nft %v: %v", args, err)
		}
		return string(out)
	}
	if _, err := run.Run(context.Background(), "nft", []string{"-f", "-"}, []byte(
		"table ip kube-proxy {\n chain filter-forward {\n type filter hook forward priority -110; policy accept;\n ct state invalid drop\n }\n}\n")); err != nil {
		t.Fatal(err)
	}
	foreign := nft("list", "table", "ip", "kube-proxy")
	var report func(*rules.Ruleset) // what felix's endpoint report would read after an apply
	var transactions int
	dp := dataplane.New(dataplane.Config{Runner: run, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		NFTables: countingDialer(dataplane.NewNftDialer(n.Path()), &transactions), Logger: slog.New(slog.DiscardHandler),
		OnProgrammed: func(_ uint64, chain func(table, name string) ([]string, bool)) {
			report = func(rs *rules.Ruleset) { checkProgrammed(t, rs, chain) }
		}})
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	full := func(v int, pool string) *rules.Ruleset {
		rs := rules.Render(rules.DefaultConfig(), res, v)
		rs = rules.WithNATOutgoing(rs, rules.NATConfig{Pools: []rules.NATPool{{CIDR: netip.MustParsePrefix(pool), NATOutgoing: true}}})
		rs = rules.WithTunnelInput(rs, rules.TunnelConfig{IPIP: v == 4, VXLAN: true,
			AllHosts: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, VXLANHosts: []netip.Addr{netip.MustParseAddr("192.0.2.1")}})
		return rules.WithWorkloadRPF(rs, []string{"cali"})
	}
	v4 := full(4, "10.70.0.0/16")
	dp.SetDesired(v4, full(6, "fd00:70::/64"))
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	if report == nil {
		t.Fatal("no OnProgrammed call after an nftables apply (the lab's apply waits on it)")
	}
	report(v4)
	if transactions != 1 {
		t.Fatalf("the first dual-stack apply took %d transactions, want 1", transactions)
	}
	want4, want6 := nft("list", "table", "ip", "calico"), nft("list", "table", "ip6", "calico")
	if !strings.Contains(want4, "chain filter-cali-FORWARD") || !strings.Contains(want6, "chain filter-cali-FORWARD") ||
		!strings.Contains(want4, "hook forward priority filter") || !strings.Contains(want4, "iifname vmap {") {
		t.Fatalf("felix's tables:\n%s\n%s", want4, want6)
	}
	// Removing the iptables mode's rules (what felix does after its first
	// sync in nftables mode) leaves the nftables tables alone.
	cleanIptablesMode(t, run)
	if got := nft("list", "table", "ip", "calico"); got != want4 {
		t.Fatalf("the iptables cleanup changed felix's nftables table:\n%s", got)
	}
	// Drift: a rule and a set's elements go behind felix's back.
	nft("flush", "chain", "ip", "calico", "filter-cali-FORWARD")
	var set string
	for _, l := range strings.Split(want4, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "set "); ok {
			set = strings.TrimSuffix(name, " {")
			break
		}
	}
	if set == "" {
		t.Fatal("no set in the scenario's table")
	}
	nft("flush", "set", "ip", "calico", set)
	if nft("list", "table", "ip", "calico") == want4 {
		t.Fatal("the drift did not change the table")
	}
	dp.InvalidateCaches() // what Run does every NftablesRefreshInterval
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := nft("list", "table", "ip", "calico"); got != want4 {
		t.Errorf("drift not repaired:\n%s\nwant:\n%s", got, want4)
	}
	if got := nft("list", "table", "ip", "kube-proxy"); got != foreign {
		t.Errorf("kube-proxy's table changed:\n%s", got)
	}
	// A change of both families (the tunnel and RPF rules go, in v4 and
	// v6) is one transaction too, and reaches both tables.
	changed := func(v int, pool string) *rules.Ruleset {
		rs := rules.Render(rules.DefaultConfig(), res, v)
		return rules.WithNATOutgoing(rs, rules.NATConfig{Pools: []rules.NATPool{{CIDR: netip.MustParsePrefix(pool), NATOutgoing: true}}})
	}
	transactions = 0
	dp.SetDesired(changed(4, "10.70.0.0/16"), changed(6, "fd00:70::/64"))
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	if transactions != 1 {
		t.Fatalf("a dual-stack change took %d transactions, want 1", transactions)
	}
	if nft("list", "table", "ip", "calico") == want4 || nft("list", "table", "ip6", "calico") == want6 {
		t.Fatal("the dual-stack change did not reach both tables")
	}
	if on, err := dataplane.KubeProxyNftables(n.Path()); err != nil || !on {
		t.Errorf("kube-proxy's nftables mode not detected: %v %v", on, err)
	}
	if removed, err := dataplane.CleanupNftables(n.Path()); err != nil || !removed {
		t.Fatalf("cleanup: %v %v", removed, err)
	}
	rs := nft("list", "ruleset")
	if strings.Contains(rs, "table ip calico") || strings.Contains(rs, "table ip6 calico") || !strings.Contains(rs, "table ip kube-proxy") {
		t.Errorf("after cleanup:\n%s", rs)
	}
}

// cleanIptablesMode removes felix's iptables rules of every backend and
// its ipsets, as felix does after its first sync in nftables mode.
func cleanIptablesMode(t *testing.T, run dataplane.Runner) {
	t.Helper()
	for _, b := range []dataplane.Backend{dataplane.BackendNFTV4, dataplane.BackendNFTV6, dataplane.BackendLegacyV4, dataplane.BackendLegacyV6} {
		if _, _, err := dataplane.CleanupBackend(context.Background(), run, b); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := dataplane.CleanupIPSets(context.Background(), run); err != nil {
		t.Fatal(err)
	}
}

// checkProgrammed: every IPv4 chain of rs is reported with its rendered
// rule hashes and as programmed; a chain felix does not have is not.
func checkProgrammed(t *testing.T, rs *rules.Ruleset, chain func(table, name string) ([]string, bool)) {
	t.Helper()
	n := 0
	for _, tb := range rs.Tables() {
		for i := range tb.Chains {
			c := &tb.Chains[i]
			var want []string
			for _, h := range c.Hashed() {
				want = append(want, h.Hash)
			}
			got, ok := chain(tb.Name, c.Name)
			if !ok || !slices.Equal(got, want) {
				t.Errorf("%s %s: reported %v %v, want %v programmed", tb.Name, c.Name, got, ok, want)
			}
			n++
		}
	}
	if n == 0 {
		t.Fatal("no chains to check")
	}
	if got, ok := chain("filter", "cali-tw-nosuch"); ok || got != nil {
		t.Errorf("a missing chain reported as %v %v", got, ok)
	}
}

// hostSetCase is a dataplane in nftables mode in a fresh namespace, with
// the scenario's rendered rules and one of its sets of host addresses.
type hostSetCase struct {
	dp           *dataplane.Dataplane
	rs           *rules.Ruleset
	set          int    // the set's index in rs.IPSets
	name         string // its nftables name
	transactions int
	nft          func(args ...string) string
}

func newHostSetCase(t *testing.T) *hostSetCase {
	n := netnstest.New(t)
	run := dataplane.ExecRunner{NetnsPath: n.Path()}
	c := &hostSetCase{nft: func(args ...string) string {
		t.Helper()
		out, err := run.Run(context.Background(), "nft", args, nil)
		if err != nil {
			t.Fatalf("nft %v: %v", args, err)
		}
		return string(out)
	}}
	c.dp = dataplane.New(dataplane.Config{Runner: run, V4: dataplane.BackendDefaultV4,
		NFTables: countingDialer(dataplane.NewNftDialer(n.Path()), &c.transactions), Logger: slog.New(slog.DiscardHandler)})
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	c.rs = rules.Render(rules.DefaultConfig(), res, 4)
	c.set = slices.IndexFunc(c.rs.IPSets, func(s rules.IPSetSpec) bool {
		return s.Type == calc.HashNet && s.Members.Len() > 0 &&
			!slices.ContainsFunc(s.Members.Slice(), func(m string) bool { return !strings.HasSuffix(m, "/32") })
	})
	if c.set < 0 {
		t.Fatal("the scenario has no set of host addresses")
	}
	c.name = rules.NftSetName(c.rs.IPSets[c.set].Name)
	return c
}

// apply programs rs with the set's members replaced by members (nil:
// as rendered), as a full list (no renderer's change record).
func (c *hostSetCase) apply(t *testing.T, members []string) {
	t.Helper()
	rs := c.rs
	if members != nil {
		grown := *c.rs
		grown.IPSets = slices.Clone(c.rs.IPSets)
		grown.IPSets[c.set].Members = calc.SortedMembers(members)
		grown.IPSetVersions, grown.IPSetChanges = nil, nil
		rs = &grown
	}
	c.transactions = 0
	c.dp.SetDesired(rs)
	if _, err := c.dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// refersToSet checks that a rule of the table still matches the set.
func (c *hostSetCase) refersToSet(t *testing.T) {
	t.Helper()
	if table := c.nft("list", "table", "ip", rules.NftTable); !strings.Contains(table, "@"+c.name) {
		t.Errorf("no rule refers to %s after the rebuild:\n%s", c.name, table)
	}
}

// TestPrivilegedNftHostSetsRetyped: a hash:net set of host addresses is
// a plain hash set (no interval flag: O(1) element updates at any size);
// when it gains a network the tables are rebuilt in the same apply with
// an interval set holding both, and the rules using it still match.
func TestPrivilegedNftHostSetsRetyped(t *testing.T) {
	c := newHostSetCase(t)
	members := c.rs.IPSets[c.set].Members.Slice()
	first := strings.TrimSuffix(members[0], "/32")
	c.apply(t, nil)
	if got := c.nft("list", "set", "ip", rules.NftTable, c.name); strings.Contains(got, "interval") || !strings.Contains(got, first) {
		t.Fatalf("a set of host addresses, want a hash set holding %s:\n%s", first, got)
	}
	c.apply(t, append(members, "10.201.0.0/16"))
	got := c.nft("list", "set", "ip", rules.NftTable, c.name)
	if !strings.Contains(got, "flags interval") || !strings.Contains(got, "10.201.0.0/16") || !strings.Contains(got, first) {
		t.Fatalf("after a network joined, want an interval set holding %s and 10.201.0.0/16:\n%s", first, got)
	}
	if c.transactions != 1 {
		t.Errorf("the rebuild took %d transactions, want 1", c.transactions)
	}
	c.refersToSet(t)
}

// TestPrivilegedNftLargeSetOutgrown: a plain set created with 1,024 or
// more members gets a size of twice its members (the kernel's
// fixed-size hash, allocated once, where its resizable hash would rehash
// under every insert of a large first fill); members up to the size are
// patched in, and one more rebuilds the tables in the same apply with a
// set twice the new count, holding every member, still matched by the
// rules.
func TestPrivilegedNftLargeSetOutgrown(t *testing.T) {
	c := newHostSetCase(t)
	hosts := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = netip.AddrFrom4([4]byte{10, 202, byte(i >> 8), byte(i)}).String() + "/32"
		}
		return out
	}
	size := func() string {
		got := c.nft("list", "set", "ip", rules.NftTable, c.name)
		for _, l := range strings.Split(got, "\n") {
			if f := strings.Fields(l); len(f) == 2 && f[0] == "size" {
				return f[1]
			}
		}
		return "none"
	}
	c.apply(t, hosts(100))
	if got := size(); got != "none" {
		t.Fatalf("a set of 100 members has size %s, want none (the resizable hash)", got)
	}
	c.apply(t, hosts(1500)) // not new: patched, still unsized
	if got := size(); got != "none" {
		t.Fatalf("after growing to 1,500 the set has size %s, want none", got)
	}

	c = newHostSetCase(t)
	c.apply(t, hosts(1200))
	if got := size(); got != "2400" {
		t.Fatalf("a new set of 1,200 members has size %s, want 2400", got)
	}
	c.apply(t, hosts(2400))
	if got := size(); got != "2400" || c.transactions != 1 {
		t.Fatalf("filled to its size: size %s in %d transactions, want 2400 in 1", got, c.transactions)
	}
	c.apply(t, hosts(2401))
	if got := size(); got != "4802" {
		t.Fatalf("outgrown: size %s, want 4802", got)
	}
	if c.transactions != 1 {
		t.Errorf("the rebuild took %d transactions, want 1", c.transactions)
	}
	got := c.nft("list", "set", "ip", rules.NftTable, c.name)
	for _, h := range []string{"10.202.0.0", "10.202.9.96"} { // the first and the 2,401st
		if !strings.Contains(got, h) {
			t.Errorf("the rebuilt set lacks %s", h)
		}
	}
	c.refersToSet(t)
}
