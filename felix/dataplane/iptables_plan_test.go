package dataplane

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/tabbynet/tabby/felix/rules"
)

// TestPlanTable: an unchanged chain is not written, a changed or new one
// is written whole, a stale one flushed and deleted (only flushed when
// kept), the hooks fixed to one at the top; the transaction declares
// before it hooks, hooks before it fills, and deletes last.
func TestPlanTable(t *testing.T) {
	same := newDesiredChain(rules.Chain{Name: "cali-same", Rules: []rules.Rule{{Action: "-j ACCEPT"}}})
	changed := newDesiredChain(rules.Chain{Name: "cali-changed", Rules: []rules.Rule{{Match: "-p tcp", Action: "-j DROP"}}})
	added := newDesiredChain(rules.Chain{Name: "cali-new", Rules: []rules.Rule{{Action: "-j cali-same"}}})
	desired := map[string]*desiredChain{"cali-same": same, "cali-changed": changed, "cali-new": added}
	hook := rules.Hook{Base: "FORWARD", Target: "cali-new"}
	actual := &tableState{
		chains: map[string][]string{"cali-same": same.hashes, "cali-changed": {"old"}, "cali-stale": {"x"}, "cali-empty": {}},
		base:   map[string][]string{"FORWARD": {"", "oldhook"}, "INPUT": {"stray"}},
	}
	in := planInput{
		table: "filter", actual: actual, names: []string{"cali-changed", "cali-new", "cali-same"},
		chain:  func(n string) *desiredChain { return desired[n] },
		wanted: func(n string) bool { return desired[n] != nil },
		hooks:  []rules.Hook{hook},
	}
	p := planTable(in)
	var writes []string
	for _, w := range p.writes {
		writes = append(writes, w.name)
	}
	if d := cmp.Diff([]string{"cali-changed", "cali-new"}, writes); d != "" {
		t.Errorf("writes (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"cali-empty", "cali-stale"}, p.stale); d != "" {
		t.Errorf("stale (-want +got):\n%s", d)
	}
	wantText := "*filter\n" +
		":cali-changed - [0:0]\n:cali-new - [0:0]\n:cali-empty - [0:0]\n:cali-stale - [0:0]\n" +
		"-D FORWARD 2\n-I FORWARD 1 " + hook.Rule().Spec + "\n-D INPUT 1\n" +
		"-A cali-changed " + changed.hashed[0].Spec + "\n-A cali-new " + added.hashed[0].Spec + "\n" +
		"-X cali-empty\n-X cali-stale\nCOMMIT\n"
	if d := cmp.Diff(wantText, p.text()); d != "" {
		t.Errorf("text (-want +got):\n%s", d)
	}
	wantBase := map[string][]string{"FORWARD": {hook.Rule().Hash, ""}, "INPUT": {}}
	if d := cmp.Diff(wantBase, p.nextBase); d != "" {
		t.Errorf("next base (-want +got):\n%s", d)
	}
	if st := p.stats(); st != (Stats{ChainsWritten: 2, ChainsDeleted: 2, HooksFixed: 2}) {
		t.Errorf("stats %+v", st)
	}

	// Re-planned keeping stale chains: the empty one is left alone, the
	// other flushed, nothing deleted.
	in.keepStale = true
	kept := planTable(in)
	if d := cmp.Diff([]string{"cali-stale"}, kept.stale); d != "" {
		t.Errorf("kept stale (-want +got):\n%s", d)
	}
	if strings.Contains(kept.text(), "-X ") || kept.stats().ChainsDeleted != 0 {
		t.Errorf("a plan keeping stale chains deletes:\n%s", kept.text())
	}

	// Once applied, nothing more to do.
	actual.chains = map[string][]string{"cali-same": same.hashes, "cali-changed": changed.hashes, "cali-new": added.hashes}
	actual.base = p.nextBase
	in.keepStale = false
	if again := planTable(in); !again.empty() {
		t.Errorf("plan after apply not empty:\n%s", again.text())
	}
}

// TestFailClosed: a rule matching a failed ipset loses that match (and
// only that one) and drops what it still matches; in nat it returns;
// rules without it, and chains without any, are left as they are.
func TestFailClosed(t *testing.T) {
	c := rules.Chain{Name: "cali-pi-x", Rules: []rules.Rule{
		{Match: "-p tcp -m set --match-set cali40bad src -m set ! --match-set cali40good dst", Action: "-j MARK --set-xmark 0x10000/0x10000"},
		{Match: "-m set ! --match-set cali40bad src,src", Action: "-j RETURN"},
		{Match: "-m set --match-set cali40good src", Action: "-j DROP"},
		{Match: "-m mark --mark 0x10000/0x10000", Action: "-j RETURN"},
	}}
	d := newDesiredChain(c)
	failed := map[string]bool{"cali40bad": true}
	fc := failClosed("filter", c.Name, d, failed)
	if fc == nil {
		t.Fatal("a chain matching a failed set is not replaced")
	}
	var got []string
	for _, r := range fc.rules {
		got = append(got, strings.TrimSpace(r.Match+" "+r.Action))
	}
	want := []string{
		"-p tcp -m set ! --match-set cali40good dst -j DROP",
		"-j DROP",
		"-m set --match-set cali40good src -j DROP",
		"-m mark --mark 0x10000/0x10000 -j RETURN",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("rules (-want +got):\n%s", diff)
	}
	if cmp.Equal(fc.hashes, d.hashes) {
		t.Error("the replaced chain hashes as the desired one")
	}
	if nat := failClosed("nat", c.Name, d, failed); nat.rules[0].Action != "-j RETURN" {
		t.Errorf("nat rule action %q, want a return", nat.rules[0].Action)
	}
	if failClosed("filter", c.Name, d, map[string]bool{"cali40other": true}) != nil {
		t.Error("a chain not matching the failed set is replaced")
	}
	if drop := dropChain("filter", "cali-x"); len(drop.rules) != 1 || drop.rules[0].Action != "-j DROP" {
		t.Errorf("drop chain %+v", drop.rules)
	}
	if drop := dropChain("nat", "cali-x"); len(drop.rules) != 0 {
		t.Errorf("nat drop chain %+v, want empty", drop.rules)
	}
}
