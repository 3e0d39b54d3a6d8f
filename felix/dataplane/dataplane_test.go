package dataplane_test

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
)

func render(objs []any) []*rules.Ruleset {
	res := calc.Compute(ct.Input(ct.Node, objs))
	return []*rules.Ruleset{rules.Render(rules.DefaultConfig(), res, 4), rules.Render(rules.DefaultConfig(), res, 6)}
}

func newDP(k *fake.Kernel) *dataplane.Dataplane {
	return dataplane.New(dataplane.Config{
		Runner: k, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
}

// checkMatches asserts the fake kernel holds exactly the desired cali
// chains and sets, and that non-cali chains are as given.
func checkMatches(t *testing.T, k *fake.Kernel, want []*rules.Ruleset) {
	t.Helper()
	var wantSets []string
	for _, rs := range want {
		for _, tbl := range rs.Tables() {
			checkTable(t, k, rs.IPVersion, tbl)
		}
		for _, s := range rs.IPSets {
			wantSets = append(wantSets, s.Name)
			var members []string
			for m := range s.Members.All() {
				switch {
				case m == "0.0.0.0/0":
					members = append(members, "0.0.0.0/1", "128.0.0.0/1")
				case m == "::/0":
					members = append(members, "::/1", "8000::/1")
				case strings.Contains(m, ":"):
					members = append(members, strings.TrimSuffix(m, "/128"))
				default:
					members = append(members, strings.TrimSuffix(m, "/32"))
				}
			}
			slices.Sort(members)
			members = slices.Compact(members)
			if got := k.Members(s.Name); !slices.Equal(got, members) && !(len(got) == 0 && len(members) == 0) {
				t.Errorf("set %s: got %v want %v", s.Name, got, members)
			}
		}
	}
	slices.Sort(wantSets)
	var gotSets []string
	for _, s := range k.Sets() {
		if strings.HasPrefix(s, "cali") {
			gotSets = append(gotSets, s)
		}
	}
	if !slices.Equal(gotSets, wantSets) {
		t.Errorf("sets: got %v want %v", gotSets, wantSets)
	}
}

// checkTable asserts one table of the fake kernel holds exactly the
// desired cali chains, each hook once at the top of its base chain.
func checkTable(t *testing.T, k *fake.Kernel, v int, tbl rules.NamedTable) {
	t.Helper()
	var got []string
	for _, c := range k.TableChains(v, tbl.Name) {
		if strings.HasPrefix(c, "cali-") {
			got = append(got, c)
		}
	}
	var names []string
	for _, c := range tbl.Chains {
		names = append(names, c.Name)
		var specs []string
		for _, r := range c.Hashed() {
			specs = append(specs, r.Spec)
		}
		if g := k.TableRules(v, tbl.Name, c.Name); !slices.Equal(g, specs) {
			t.Errorf("v%d %s chain %s:\n got %q\nwant %q", v, tbl.Name, c.Name, g, specs)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("v%d %s chains: got %v want %v", v, tbl.Name, got, names)
	}
	for _, h := range tbl.Hooks {
		base := k.TableRules(v, tbl.Name, h.Base)
		n := 0
		for _, r := range base {
			if strings.Contains(r, "cali:") {
				n++
			}
		}
		if len(base) == 0 || base[0] != h.Rule().Spec || n != 1 {
			t.Errorf("v%d %s %s: want exactly one hook at the top, have %q", v, tbl.Name, h.Base, base)
		}
	}
}

func TestFirstSyncThenNoop(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	k.SetRules(4, "DOCKER", []string{"-j RETURN"})
	k.SetRules(4, "FORWARD", []string{"-j DOCKER"})
	dp := newDP(k)
	want := render(ct.Scenario())
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	checkMatches(t, k, want)
	if got := k.Count("iptables-restore"); got != 3 {
		t.Errorf("iptables-restore calls = %d, want 3 (one per table: raw, mangle, filter)", got)
	}
	if got := k.Rules(4, "DOCKER"); !slices.Equal(got, []string{"-j RETURN"}) {
		t.Errorf("non-cali chain touched: %v", got)
	}
	if got := k.Rules(4, "FORWARD"); len(got) != 2 || got[1] != "-j DOCKER" {
		t.Errorf("FORWARD = %v, want our hook then the foreign rule", got)
	}
	before := len(k.Calls())
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := k.Calls()[before:]; len(calls) != 0 {
		t.Errorf("unchanged state ran %v, want nothing (cache)", calls)
	}
}

func TestOneChangeRewritesOnlyAffectedChains(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	objs := ct.Scenario()
	dp.SetDesired(render(objs)...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	// Change the rules of one policy: only its chain pair changes.
	for _, o := range objs {
		if p, ok := o.(*v3.NetworkPolicy); ok && p.Name == "web-from-partners" {
			p.Spec.Ingress[0].Destination.NotPorts = ct.Ports("23")
		}
	}
	want := render(objs)
	dp.SetDesired(want...)
	res, err := dp.Apply(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.V4.ChainsWritten != 1 || res.V6.ChainsWritten != 1 || res.V4.Restores != 1 {
		t.Errorf("got %v, want one chain rewritten per version in one restore each", res)
	}
	checkMatches(t, k, want)

	// Remove a policy and an endpoint: stale chains and sets go.
	var fewer []any
	for _, o := range objs {
		if p, ok := o.(*v3.NetworkPolicy); ok && p.Name == "client-egress" {
			continue
		}
		fewer = append(fewer, o)
	}
	want = render(fewer)
	dp.SetDesired(want...)
	if res, err = dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	// The (egress-only) policy's one chain goes, and so does the shared
	// body of the one workload it applied to: the workload's chain now
	// goes to the body without that policy (written, with the chain
	// itself).
	if res.V4.ChainsDeleted != 2 || res.V4.ChainsWritten != 2 || res.SetsDeleted == 0 {
		t.Errorf("got %v, want the policy's chain, the old body and its set deleted, the new body and the workload chain written", res)
	}
	checkMatches(t, k, want)
}

func TestDriftRepairedOnRefresh(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	want := render(ct.Scenario())
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	// Someone deletes a rule, a whole chain's hook, and a set member, and
	// adds their own chain.
	k.SetRules(4, "cali-tw-cali1111", k.Rules(4, "cali-tw-cali1111")[1:])
	k.SetRules(4, "FORWARD", nil)
	var set string
	for _, s := range want[0].IPSets {
		if s.Members.Len() > 0 {
			set = s.Name
		}
	}
	k.DelMember(set, k.Members(set)[0])
	k.SetRules(4, "mine", []string{"-j ACCEPT"})
	dp.InvalidateCaches()
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	checkMatches(t, k, want)
	if got := k.Rules(4, "mine"); len(got) != 1 {
		t.Errorf("foreign chain touched: %v", got)
	}
}

// TestFailureRereadsAndRetries: a failed restore (here injected once) is
// no reason to give up the apply: the table is read again and the apply
// re-planned and written.
func TestFailureRereadsAndRetries(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	want := render(ct.Scenario())
	dp.SetDesired(want...)
	k.FailNext("iptables-restore", 1)
	// The failed restore is the first table's (raw): the retry must read
	// that table again before writing it.
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if got := k.Count("iptables-save -t raw"); got != 2 {
		t.Errorf("raw table read %d times, want 2 (again after the failure)", got)
	}
	checkMatches(t, k, want)
}

func TestRunRetriesAndRefreshes(t *testing.T) {
	k := fake.NewKernel()
	reg := prometheus.NewRegistry()
	dp := dataplane.New(dataplane.Config{
		Runner: k, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		RefreshInterval: 20 * time.Millisecond, MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler), Metrics: dataplane.NewMetrics(reg),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("Run returned %v, want context.Canceled", err)
		}
	}()
	k.FailNext("ipset", 3)
	want := render(ct.Scenario())
	dp.SetDesired(want...)
	waitFor(t, func() bool { return len(k.Rules(4, "cali-FORWARD")) > 0 })
	k.SetRules(4, "cali-FORWARD", nil)
	waitFor(t, func() bool { return len(k.Rules(4, "cali-FORWARD")) > 0 })
	waitFor(t, dp.InSync)
	if got := metric(t, reg, "felix_dataplane_failures_total"); got != 3 {
		t.Errorf("failures metric = %v, want the 3 injected", got)
	}
	if got := metric(t, reg, "felix_dataplane_rules"); got < 50 {
		t.Errorf("rules metric = %v, want the scenario's rules", got)
	}
}

func metric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		m := mf.GetMetric()[0]
		if c := m.GetCounter(); c != nil {
			return c.GetValue()
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no metric %s", name)
	return 0
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestStaleChainReferencedByOthersDoesNotBlock: a chain felix no longer
// wants cannot be deleted while a foreign rule jumps to it; the rest of the
// update must still land.
func TestStaleChainReferencedByOthersDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	objs := ct.Scenario()
	dp.SetDesired(render(objs)...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	k.SetRules(4, "MINE", []string{"-j cali-tw-cali2222"}) // someone jumps to db's chain
	var fewer []any
	for _, o := range objs {
		if w, ok := o.(*v3.WorkloadEndpoint); ok && w.Spec.Pod == "db" {
			continue // db goes away: its chains become stale
		}
		if p, ok := o.(*v3.NetworkPolicy); ok && p.Name == "web-from-partners" {
			q := p.DeepCopy()
			q.Spec.Ingress[0].Destination.NotPorts = ct.Ports("2323")
			o = q
		}
		fewer = append(fewer, o)
	}
	want := render(fewer)
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatalf("apply failed: %v", err)
	}
	if !slices.Contains(k.Chains(4), "cali-tw-cali2222") || len(k.Rules(4, "cali-tw-cali2222")) != 0 {
		t.Errorf("want the referenced stale chain kept, empty")
	}
	for _, c := range want[0].Chains {
		var specs []string
		for _, r := range c.Hashed() {
			specs = append(specs, r.Spec)
		}
		if got := k.Rules(4, c.Name); !slices.Equal(got, specs) {
			t.Errorf("chain %s not updated", c.Name)
		}
	}
	// Once the foreign rule is gone, a resync deletes the chain.
	k.SetRules(4, "MINE", nil)
	dp.InvalidateCaches()
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(k.Chains(4), "cali-tw-cali2222") {
		t.Error("stale chain not deleted after the reference went")
	}
}

// TestStaleSetInUseDoesNotBlock: a set felix no longer wants but someone
// else still uses is kept (the sync succeeds) and destroyed once free.
func TestStaleSetInUseDoesNotBlock(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	dp.SetDesired(render(ct.Scenario())...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	before := k.Sets()
	dp.SetDesired(render(nil)...) // nothing wanted: every set is stale
	k.PinSet(before[0], true)
	res, err := dp.Apply(ctx)
	if err != nil {
		t.Fatalf("apply: %v", err)
	}
	if got := k.Sets(); !slices.Equal(got, before[:1]) || res.SetsDeleted != len(before)-1 {
		t.Errorf("sets left %v (deleted %d), want only the pinned %s", got, res.SetsDeleted, before[0])
	}
	k.PinSet(before[0], false)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	if got := k.Sets(); len(got) != 0 {
		t.Errorf("sets left %v after unpinning", got)
	}
}

// TestRawAndMangleFollowHostPolicies: untracked and preDNAT policy chains
// come and go in the raw and mangle tables like the filter table's, with
// the hooks on top and foreign rules and chains left alone.
func TestRawAndMangleFollowHostPolicies(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	k.SetTableRules(4, "raw", "MYRAW", []string{"-j RETURN"})
	k.SetTableRules(4, "raw", "PREROUTING", []string{"-j MYRAW"})
	dp := newDP(k)
	full := ct.Scenario()
	want := render(full)
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	checkMatches(t, k, want)
	for _, tc := range []struct{ table, chain string }{{"raw", "cali-fh-eth0"}, {"raw", "cali-th-eth0"}, {"mangle", "cali-fh-eth0"}} {
		if len(k.TableRules(4, tc.table, tc.chain)) == 0 {
			t.Errorf("%s %s not programmed", tc.table, tc.chain)
		}
	}
	// Without the preDNAT and doNotTrack policies their chains go.
	var plain []any
	for _, o := range full {
		if p, ok := o.(*v3.GlobalNetworkPolicy); ok && (p.Spec.PreDNAT || p.Spec.DoNotTrack) {
			continue
		}
		plain = append(plain, o)
	}
	want = render(plain)
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	checkMatches(t, k, want)
	stale := func(table string, prefixes ...string) {
		t.Helper()
		for _, c := range k.TableChains(4, table) {
			for _, p := range prefixes {
				if strings.HasPrefix(c, p) {
					t.Errorf("stale %s chain %s kept", table, c)
				}
			}
		}
	}
	stale("raw", "cali-fh-", "cali-th-", "cali-pi-", "cali-po-")
	stale("mangle", "cali-fh-")
	// Without host endpoints, mangle keeps no endpoint or policy chains
	// either (it holds their egress policy for DNAT'd host traffic).
	var noHEPs []any
	for _, o := range plain {
		if _, ok := o.(*v3.HostEndpoint); !ok {
			noHEPs = append(noHEPs, o)
		}
	}
	want = render(noHEPs)
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	checkMatches(t, k, want)
	stale("mangle", "cali-fh-", "cali-th-", "cali-pi-", "cali-po-", "cali-pro-")
	if got := k.TableRules(4, "raw", "PREROUTING"); len(got) != 2 || got[1] != "-j MYRAW" {
		t.Errorf("raw PREROUTING = %q, want our hook then the foreign rule", got)
	}
	if got := k.TableRules(4, "raw", "MYRAW"); !slices.Equal(got, []string{"-j RETURN"}) {
		t.Errorf("foreign raw chain touched: %q", got)
	}
}

// TestReadyNamesFailure: while applies fail, Ready's reason is the
// failure (not "not in sync yet"); a success clears it.
func TestReadyNamesFailure(t *testing.T) {
	k := fake.NewKernel()
	dp := dataplane.New(dataplane.Config{
		Runner: k, V4: dataplane.BackendDefaultV4, MinBackoff: 300 * time.Millisecond, MaxBackoff: 300 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler),
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	k.FailNext("iptables-restore", 2)
	dp.SetDesired(render(ct.Scenario())...)
	waitFor(t, func() bool {
		_, why := dp.Ready()
		return strings.HasPrefix(why, "sync failing (retrying): ")
	})
	waitFor(t, func() bool { ok, _ := dp.Ready(); return ok })
}
