package dataplane_test

import (
	"context"
	"errors"
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

// zeroObjects are two local pods; web's ingress denies the sources of a
// GlobalNetworkSet, a NetworkSet and a rule's nets list that all hold
// the whole address space (0.0.0.0/0 and ::/0: ipsets, as each is
// selected or has more than one net), then allows everything else.
func zeroObjects(extra ...any) []any {
	deny := func(src v3.EntityRule) v3.Rule { return v3.Rule{Action: v3.Deny, Source: src} }
	return append([]any{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "web", ct.Node, "caliweb", "10.65.0.1", map[string]string{"app": "web"}),
		ct.WEP("prod", "db", ct.Node, "calidb", "10.65.0.2", map[string]string{"app": "db"}),
		ct.GlobalNetSet("everyone", map[string]string{"gset": "all"}, "0.0.0.0/0", "::/0"),
		ct.NetSet("prod", "everyone-ns", map[string]string{"nset": "all"}, "0.0.0.0/0", "::/0"),
		ct.GNP("web-deny", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
			deny(v3.EntityRule{Selector: "gset == 'all'"}),
			deny(v3.EntityRule{Selector: "nset == 'all'"}),
			deny(v3.EntityRule{Nets: []string{"0.0.0.0/0", "10.1.0.0/16"}}),
			deny(v3.EntityRule{Nets: []string{"::/0", "fd00:1::/64"}}),
			{Action: v3.Allow},
		}, nil),
	}, extra...)
}

// zeroSets are the sets of rs holding a /0 member.
func zeroSets(rs []*rules.Ruleset) []rules.IPSetSpec {
	var out []rules.IPSetSpec
	for _, r := range rs {
		for _, s := range r.IPSets {
			if s.Members.Has("0.0.0.0/0") || s.Members.Has("::/0") {
				out = append(out, s)
			}
		}
	}
	return out
}

// TestZeroNetworksAsHalves: sets holding 0.0.0.0/0 or ::/0 (which the
// kernel's hash:net refuses) are programmed, each /0 as its two /1s, and
// the rest of the dataplane with them.
func TestZeroNetworksAsHalves(t *testing.T) {
	k := fake.NewKernel()
	dp := newDP(k)
	want := render(zeroObjects())
	dp.SetDesired(want...)
	if _, err := dp.Apply(context.Background()); err != nil {
		t.Fatal(err)
	}
	sets := zeroSets(want)
	if len(sets) != 6 {
		t.Fatalf("%d sets hold a /0, want 6 (3 sources x 2 families): %v", len(sets), sets)
	}
	for _, s := range sets {
		got := k.Members(s.Name)
		halves := []string{"0.0.0.0/1", "128.0.0.0/1"}
		if s.Family == "inet6" {
			halves = []string{"8000::/1", "::/1"}
		}
		for _, h := range halves {
			if !slices.Contains(got, h) {
				t.Errorf("set %s holds %v, want %s", s.Name, got, h)
			}
		}
	}
	for _, rs := range want {
		for _, tbl := range rs.Tables() {
			checkTable(t, k, rs.IPVersion, tbl)
		}
	}
	if ok, why := dp.Ready(); ok || why != "not in sync yet" {
		// Apply alone is no sync of Run's; nothing is unprogrammed.
		t.Errorf("Ready() = %v, %q", ok, why)
	}
}

// policyChain is the name of the ingress chain of GlobalNetworkPolicy
// name (tier default) in rs.
func policyChain(t *testing.T, rs *rules.Ruleset, name string) string {
	t.Helper()
	want := rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Name: name})
	for _, c := range rs.Chains {
		if c.Name == want {
			return c.Name
		}
	}
	t.Fatalf("no ingress chain of %s", name)
	return ""
}

// gsetName is the kernel name of the IPv4 set of the GlobalNetworkSet's
// selector (the first set web-deny's ingress chain matches).
func gsetName(t *testing.T, rs *rules.Ruleset) string {
	t.Helper()
	chain := policyChain(t, rs, "web-deny")
	for _, c := range rs.Chains {
		if c.Name != chain {
			continue
		}
		for _, r := range c.Rules {
			if i := strings.Index(r.Match, "--match-set "); i >= 0 {
				return strings.Fields(r.Match[i:])[1]
			}
		}
	}
	t.Fatal("no set in web-deny's chain")
	return ""
}

// TestFailedSetIsolatedAndFailsClosed: one set the kernel refuses (a
// fault injected for its name) stops neither the other sets nor an
// unrelated policy change; the rules matching it drop whatever they
// still match (the Deny is widened, never dropped); it is named in
// Ready, counted, and programmed once the kernel takes it, its rules
// then restored.
func TestFailedSetIsolatedAndFailsClosed(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	reg := prometheus.NewRegistry()
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		MinBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Metrics: dataplane.NewMetrics(reg)})
	dp.SetDesired(render(zeroObjects())...)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatal(err)
	}
	// The GlobalNetworkSet changes while the kernel refuses its set, and
	// db gets a default deny in the same update.
	dbDeny := ct.GNP("db-deny", "default", ct.Ptr(20.0), "app == 'db'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)
	objs := zeroObjects(dbDeny)
	objs[3] = ct.GlobalNetSet("everyone", map[string]string{"gset": "all"}, "0.0.0.0/0", "::/0", "10.9.0.0/16")
	want := render(objs)
	bad := gsetName(t, want[0])
	k.BreakSet(bad, true)
	dp.SetDesired(want...)
	_, err := dp.Apply(ctx)
	if !errors.Is(err, dataplane.ErrUnprogrammed) || !strings.Contains(err.Error(), bad) {
		t.Fatalf("apply: %v; want ErrUnprogrammed naming %s", err, bad)
	}
	if ok, why := dp.Ready(); ok || !strings.Contains(why, "ipset "+bad) {
		t.Errorf("Ready() = %v, %q; want it to name ipset %s", ok, why, bad)
	}
	// The unrelated change is programmed.
	dbChain := policyChain(t, want[0], "db-deny")
	if got := k.Rules(4, dbChain); len(got) == 0 {
		t.Errorf("db's new policy chain %s not programmed", dbChain)
	}
	// web's chain: the rule with the failed set drops all that reaches it.
	webChain := policyChain(t, want[0], "web-deny")
	got := k.Rules(4, webChain)
	if len(got) == 0 || strings.Contains(strings.Join(got, "\n"), bad) {
		t.Fatalf("web's chain still matches the failed set (or is missing):\n%s", strings.Join(got, "\n"))
	}
	if !slices.ContainsFunc(got, func(r string) bool {
		return strings.Contains(r, "could not be programmed") && strings.HasSuffix(r, "-j DROP") && !strings.Contains(r, "--match-set")
	}) {
		t.Errorf("web's chain has no unconditional drop in the failed rule's place:\n%s", strings.Join(got, "\n"))
	}
	if n := labelled(t, reg, "felix_dataplane_object_failures_total", "ipset"); n < 1 {
		t.Errorf("ipset failures counted %v", n)
	}
	if n := labelled(t, reg, "felix_dataplane_unprogrammed_objects", "ipset"); n != 1 {
		t.Errorf("unprogrammed ipsets %v, want 1", n)
	}

	// Mended: the retry (once due) programs the set and restores the rule.
	k.BreakSet(bad, false)
	time.Sleep(10 * time.Millisecond)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatalf("retry: %v", err)
	}
	checkMatches(t, k, want)
	if n := labelled(t, reg, "felix_dataplane_unprogrammed_objects", "ipset"); n != 0 {
		t.Errorf("unprogrammed ipsets %v after the retry, want 0", n)
	}
}

// TestFailedChainIsolated: a chain the kernel refuses is replaced by one
// that drops everything, the rest of the table is programmed, the chain
// is named in Ready, and it is programmed once the kernel takes it.
func TestFailedChainIsolated(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := newDP(k)
	want := render(zeroObjects())
	webChain := policyChain(t, want[0], "web-deny")
	var brokenRule string // the hash comment of the chain's first rule
	for _, c := range want[0].Chains {
		if c.Name == webChain {
			brokenRule = "cali:" + c.Hashed()[0].Hash
		}
	}
	k.BreakRule(brokenRule, true)
	dp.SetDesired(want...)
	_, err := dp.Apply(ctx)
	if !errors.Is(err, dataplane.ErrUnprogrammed) || !strings.Contains(err.Error(), webChain) {
		t.Fatalf("apply: %v; want ErrUnprogrammed naming %s", err, webChain)
	}
	if got := k.Rules(4, webChain); len(got) != 1 || !strings.HasSuffix(got[0], "-j DROP") {
		t.Errorf("failed chain holds %q, want one drop", got)
	}
	for _, c := range want[0].Chains {
		if c.Name == webChain {
			continue
		}
		var specs []string
		for _, r := range c.Hashed() {
			specs = append(specs, r.Spec)
		}
		if got := k.Rules(4, c.Name); !slices.Equal(got, specs) {
			t.Errorf("chain %s not programmed", c.Name)
		}
	}
	if ok, why := dp.Ready(); ok || !strings.Contains(why, "IPv4 filter chain "+webChain) {
		t.Errorf("Ready() = %v, %q", ok, why)
	}
	k.BreakRule(brokenRule, false)
	time.Sleep(10 * time.Millisecond)
	if _, err := dp.Apply(ctx); err != nil {
		t.Fatalf("retry: %v", err)
	}
	checkMatches(t, k, want)
}

// TestRunRetriesFailedSetWithoutHoldingUpOthers: under Run, a failed set
// is retried on its own backoff while other changes are applied at once.
func TestRunRetriesFailedSetWithoutHoldingUpOthers(t *testing.T) {
	k := fake.NewKernel()
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		MinBackoff: 200 * time.Millisecond, MaxBackoff: time.Second, Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- dp.Run(ctx) }()
	defer func() { cancel(); <-done }()
	first := render(zeroObjects())
	k.BreakSet(gsetName(t, first[0]), true)
	dp.SetDesired(first...)
	waitFor(t, func() bool { _, why := dp.Ready(); return strings.Contains(why, gsetName(t, first[0])) })
	second := render(zeroObjects(ct.GNP("db-deny", "default", ct.Ptr(20.0), "app == 'db'", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)))
	dp.SetDesired(second...)
	dbChain := policyChain(t, second[0], "db-deny")
	start := time.Now()
	waitFor(t, func() bool { return len(k.Rules(4, dbChain)) > 0 })
	if took := time.Since(start); took > 150*time.Millisecond {
		t.Errorf("the unrelated change took %v: held up by the failed set's retry", took)
	}
	k.BreakSet(gsetName(t, first[0]), false)
	waitFor(t, dp.InSync)
	checkMatches(t, k, second)
}

// labelled is the value of the series of metric name with label value v.
func labelled(t *testing.T, reg *prometheus.Registry, name, v string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if m.GetLabel()[0].GetValue() != v {
				continue
			}
			if c := m.GetCounter(); c != nil {
				return c.GetValue()
			}
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no metric %s{%s}", name, v)
	return 0
}

// TestFailedObjectsNotRetriedBeforeDue: while a failed chain's and a
// failed set's retries are not due, applies leave them alone (no restore
// at all when nothing else changed) and keep reporting them; a change of
// the failed set's desired members is retried at once.
func TestFailedObjectsNotRetriedBeforeDue(t *testing.T) {
	ctx := context.Background()
	k := fake.NewKernel()
	dp := dataplane.New(dataplane.Config{Runner: k, V4: dataplane.BackendDefaultV4, V6: dataplane.BackendDefaultV6,
		MinBackoff: time.Hour, MaxBackoff: time.Hour, Logger: slog.New(slog.DiscardHandler)})
	want := render(zeroObjects())
	const dbChain = "cali-tw-calidb" // db's ingress chain: no set in it
	bad := gsetName(t, want[0])
	k.BreakSet(bad, true)
	for _, c := range want[0].Chains {
		if c.Name == dbChain {
			k.BreakRule("cali:"+c.Hashed()[0].Hash, true)
		}
	}
	dp.SetDesired(want...)
	if _, err := dp.Apply(ctx); !errors.Is(err, dataplane.ErrUnprogrammed) {
		t.Fatalf("apply: %v", err)
	}
	calls := len(k.Calls())
	_, err := dp.Apply(ctx)
	if !errors.Is(err, dataplane.ErrUnprogrammed) || !strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), dbChain) {
		t.Fatalf("second apply: %v; want both failures still reported", err)
	}
	if got := k.Calls()[calls:]; len(got) != 0 {
		t.Errorf("an apply with nothing due ran %q", got)
	}
	if got := k.Rules(4, dbChain); len(got) != 1 || !strings.HasSuffix(got[0], "-j DROP") {
		t.Errorf("failed chain holds %q, want one drop", got)
	}
	// The set's members change: retried at once (and programmed, the
	// kernel now taking it).
	k.BreakSet(bad, false)
	objs := zeroObjects()
	objs[3] = ct.GlobalNetSet("everyone", map[string]string{"gset": "all"}, "0.0.0.0/0", "::/0", "10.9.0.0/16")
	dp.SetDesired(render(objs)...)
	_, err = dp.Apply(ctx)
	if !errors.Is(err, dataplane.ErrUnprogrammed) || strings.Contains(err.Error(), bad) || !strings.Contains(err.Error(), dbChain) {
		t.Fatalf("apply after the set changed: %v; want only the chain still failed", err)
	}
	if got := k.Members(bad); !slices.Contains(got, "10.9.0.0/16") {
		t.Errorf("the changed set holds %v", got)
	}
}
