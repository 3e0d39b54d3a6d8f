package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/felix/rules"
)

// This file is the pure half of the iptables driver: planTable decides
// what one apply changes in a table (tablePlan) from what the kernel
// holds and the chains and hooks wanted; the plan's text is its
// `iptables-restore --noflush` transaction. Table (iptables.go) executes
// plans and records their outcome.

// tablePlan is what one apply changes in one table.
type tablePlan struct {
	table string
	// writes are the chains (re)written whole: declared (which flushes
	// them) and filled.
	writes []chainWrite
	// stale are the cali- chains no longer wanted: flushed, and deleted
	// unless keepStale (a stale chain someone else still jumps to cannot
	// be deleted, and must not block the rest).
	stale     []string
	keepStale bool
	// hookLines fix felix's rules in the base chains (deletions by
	// position, then the insert or append); nextBase is what the base
	// chains hold afterwards (hashes, "" for rules not felix's).
	hookLines  []string
	hooksFixed int
	nextBase   map[string][]string
}

// chainWrite is one chain written whole.
type chainWrite struct {
	name  string
	chain *desiredChain
}

// planInput is what planTable looks at.
type planInput struct {
	table  string
	actual *tableState
	// names are the wanted chains, sorted; chain gives each one's rules
	// (the desired ones, or what stands for them while they fail).
	names       []string
	chain       func(name string) *desiredChain
	wanted      func(name string) bool
	hooks       []rules.Hook
	appendHooks bool
	keepStale   bool
}

// planTable plans the apply that makes the table hold the wanted chains
// and exactly one felix hook per base chain (at the top, or the end with
// appendHooks); chains and rules felix does not own are never touched.
func planTable(in planInput) tablePlan {
	p := tablePlan{table: in.table, keepStale: in.keepStale}
	for _, name := range in.names {
		want := in.chain(name)
		if have, ok := in.actual.chains[name]; ok && sameHashes(have, want.hashes) {
			continue
		}
		p.writes = append(p.writes, chainWrite{name: name, chain: want})
	}
	for name, have := range in.actual.chains {
		if !in.wanted(name) && !(in.keepStale && len(have) == 0) {
			p.stale = append(p.stale, name)
		}
	}
	slices.Sort(p.stale)
	p.hookLines, p.nextBase, p.hooksFixed = planHooks(in.actual.base, in.hooks, in.appendHooks)
	return p
}

// planHooks plans the base chains: exactly one felix rule in each base
// chain a hook goes into, at its top (at its end with appendHooks), and
// none in the others. Base chains are known only by their rules' hashes
// ("" for rules felix does not own). It returns the lines that fix them,
// what every base chain then holds, and how many were fixed.
func planHooks(base map[string][]string, hooks []rules.Hook, appendHooks bool) (lines []string, next map[string][]string, fixed int) {
	wantHook := map[string]rules.HashedRule{}
	for _, h := range hooks {
		wantHook[h.Base] = h.Rule()
	}
	bases := map[string]bool{}
	for b := range wantHook {
		bases[b] = true
	}
	for b, hs := range base {
		if slices.ContainsFunc(hs, func(h string) bool { return h != "" }) {
			bases[b] = true
		}
	}
	next = map[string][]string{}
	for _, b := range slices.Sorted(maps.Keys(bases)) {
		have := base[b]
		want, wanted := wantHook[b]
		if wanted && hookInPlace(have, want.Hash, appendHooks) {
			next[b] = slices.Clone(have)
			continue
		}
		fixed++
		newBase := slices.Clone(have)
		for i := len(have) - 1; i >= 0; i-- {
			if have[i] != "" {
				lines = append(lines, fmt.Sprintf("-D %s %d", b, i+1))
				newBase = slices.Delete(newBase, i, i+1)
			}
		}
		switch {
		case wanted && appendHooks:
			lines = append(lines, fmt.Sprintf("-A %s %s", b, want.Spec))
			newBase = append(newBase, want.Hash)
		case wanted:
			lines = append(lines, fmt.Sprintf("-I %s 1 %s", b, want.Spec))
			newBase = slices.Insert(newBase, 0, want.Hash)
		}
		next[b] = newBase
	}
	for b, hs := range base {
		if _, ok := next[b]; !ok {
			next[b] = hs
		}
	}
	return lines, next, fixed
}

// hookInPlace says whether base chain rules have holds felix's rule hash
// once and nothing else of felix's, in its place.
func hookInPlace(have []string, hash string, appendHooks bool) bool {
	ours := 0
	for _, h := range have {
		if h != "" {
			ours++
		}
	}
	pos := 0
	if appendHooks {
		pos = len(have) - 1
	}
	return ours == 1 && len(have) > 0 && have[pos] == hash
}

// empty says the plan changes nothing.
func (p *tablePlan) empty() bool {
	return len(p.writes) == 0 && len(p.stale) == 0 && len(p.hookLines) == 0
}

// stats is what the plan does.
func (p *tablePlan) stats() Stats {
	st := Stats{ChainsWritten: len(p.writes), HooksFixed: p.hooksFixed}
	if !p.keepStale {
		st.ChainsDeleted = len(p.stale)
	}
	return st
}

// text is the plan's transaction. Hooks go before the chain bodies so a
// deleted old hook never points at a chain being removed, and after the
// declarations so a new hook's target exists.
func (p *tablePlan) text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", p.table)
	for _, w := range p.writes {
		fmt.Fprintf(&b, ":%s - [0:0]\n", w.name)
	}
	for _, name := range p.stale {
		fmt.Fprintf(&b, ":%s - [0:0]\n", name)
	}
	for _, l := range p.hookLines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	writeBodies(&b, p.writes)
	if !p.keepStale {
		for _, name := range p.stale {
			fmt.Fprintf(&b, "-X %s\n", name)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func writeBodies(b *strings.Builder, writes []chainWrite) {
	for _, w := range writes {
		for _, r := range w.chain.hashed {
			b.WriteString("-A ")
			b.WriteString(w.name)
			b.WriteByte(' ')
			b.WriteString(r.Spec)
			b.WriteByte('\n')
		}
	}
}

// declareText declares (creates empty) the chains of writes the kernel
// does not have, so that any subset of the writes can then be written on
// its own (see writesText).
func declareText(table string, writes []chainWrite, actual *tableState) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, w := range writes {
		if _, ok := actual.chains[w.name]; !ok {
			fmt.Fprintf(&b, ":%s - [0:0]\n", w.name)
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// writesText is a transaction writing only writes (every chain they
// jump to must exist).
func writesText(table string, writes []chainWrite) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%s\n", table)
	for _, w := range writes {
		fmt.Fprintf(&b, ":%s - [0:0]\n", w.name)
	}
	writeBodies(&b, writes)
	b.WriteString("COMMIT\n")
	return b.String()
}

// newDesiredChain renders and hashes a chain's rules.
func newDesiredChain(c rules.Chain) *desiredChain {
	d := &desiredChain{rules: c.Rules, hashed: c.Hashed()}
	d.hashes = make([]string, len(d.hashed))
	for j, r := range d.hashed {
		d.hashes[j] = r.Hash
	}
	return d
}

// dropChain is what stands for chain name of table while it cannot be
// programmed: it drops everything that reaches it (in nat, which has no
// DROP, it is empty: no translation rather than a wrong one).
func dropChain(table, name string) *desiredChain {
	c := rules.Chain{Name: name}
	if table != "nat" {
		c.Rules = []rules.Rule{{Action: "-j DROP", Comment: "Drop: felix could not program this chain"}}
	}
	return newDesiredChain(c)
}

// setMatch is how a rule matches an ipset (see rules' match.go).
const setMatch = "--match-set "

// usedSets are the ipsets d's rules match, memoised on d.
func (d *desiredChain) usedSets() []string {
	if d.sets == nil {
		d.sets = []string{}
		for _, r := range d.rules {
			for rest := r.Match; ; {
				_, after, ok := strings.Cut(rest, setMatch)
				if !ok {
					break
				}
				name, _, _ := strings.Cut(after, " ")
				if !slices.Contains(d.sets, name) {
					d.sets = append(d.sets, name)
				}
				rest = after
			}
		}
	}
	return d.sets
}

// failClosed is chain name (desired as d) with every rule that matches
// one of the failed ipsets made to fail closed, or nil when no rule does.
// Such a rule loses its set matches (so it matches at least what it did)
// and drops what it matches (in nat, which has no DROP, it returns: no
// translation). A packet the rule would have let on is dropped, one it
// would not have matched goes on as before: the chain never accepts more
// than it would with the set programmed, whatever the set was for (a
// Deny's source, an Allow's, a negated match).
func failClosed(table, name string, d *desiredChain, failed map[string]bool) *desiredChain {
	if !slices.ContainsFunc(d.usedSets(), func(s string) bool { return failed[s] }) {
		return nil
	}
	action := "-j DROP"
	if table == "nat" {
		action = "-j RETURN"
	}
	out := make([]rules.Rule, len(d.rules))
	for i, r := range d.rules {
		out[i] = r
		if m, cut := withoutSets(r.Match, failed); cut {
			out[i] = rules.Rule{Match: m, Action: action, Comment: "Drop: an ipset of this rule could not be programmed"}
		}
	}
	return newDesiredChain(rules.Chain{Name: name, Rules: out})
}

// withoutSets is match without its matches of the failed sets ("-m set
// [!] --match-set NAME DIR"), and whether it had any.
func withoutSets(match string, failed map[string]bool) (string, bool) {
	f := strings.Fields(match)
	var out []string
	cut := false
	for i := 0; i < len(f); i++ {
		if f[i] == "-m" && i+1 < len(f) && f[i+1] == "set" {
			j := i + 2
			if j < len(f) && f[j] == "!" {
				j++
			}
			if j+2 < len(f) && f[j] == strings.TrimSpace(setMatch) && failed[f[j+1]] {
				i = j + 2
				cut = true
				continue
			}
		}
		out = append(out, f[i])
	}
	return strings.Join(out, " "), cut
}
