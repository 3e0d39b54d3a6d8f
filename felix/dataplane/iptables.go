package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/felix/rules"
)

// Backend names the iptables binaries of one IP version and backend.
type Backend struct {
	Save, Restore string
}

// Backends: the system's default alternative (what `iptables` is), and
// the explicit nft and legacy ones.
var (
	BackendDefaultV4 = Backend{Save: "iptables-save", Restore: "iptables-restore"}
	BackendDefaultV6 = Backend{Save: "ip6tables-save", Restore: "ip6tables-restore"}
	BackendNFTV4     = Backend{Save: "iptables-nft-save", Restore: "iptables-nft-restore"}
	BackendLegacyV4  = Backend{Save: "iptables-legacy-save", Restore: "iptables-legacy-restore"}
)

// Table reconciles felix's chains in one iptables table (see the package
// comment). It is not safe for concurrent use; Dataplane serialises it.
type Table struct {
	name    string
	backend Backend
	run     Runner

	desired     map[string]*desiredChain
	names       []string // desired's keys, sorted
	hooks       []rules.Hook
	actual      *tableState // nil: unknown, read before the next apply
	lastRestore string
	// appendHooks puts felix's hook rules at the end of the base chains
	// (Calico's ChainInsertMode Append) instead of the top.
	appendHooks bool
	// last are the chains of the last SetDesired; clean says the last
	// Apply made the kernel match the desired state and nothing changed
	// since (Apply then has nothing to do).
	last  []rules.Chain
	clean bool
}

type tableState struct {
	// chains maps each cali- chain to its rules' hashes ("" for a rule
	// without one).
	chains map[string][]string
	// base maps each base chain a hook goes into to the hashes of its
	// rules, "" for rules felix does not own.
	base map[string][]string
}

// desiredChain is one chain's rules, rendered and hashed once.
type desiredChain struct {
	rules  []rules.Rule
	hashed []rules.HashedRule
	hashes []string
}

// NewTable returns a driver for table ("filter") using backend's binaries.
func NewTable(table string, backend Backend, run Runner) *Table {
	return &Table{name: table, backend: backend, run: run, desired: map[string]*desiredChain{}}
}

// SetDesired replaces the desired chains and hooks. Chains whose rules are
// unchanged keep their hashes (hashing is most of the cost otherwise).
func (t *Table) SetDesired(chains []rules.Chain, hooks []rules.Hook) {
	if sameChains(t.last, chains) && slices.Equal(t.hooks, hooks) {
		return // the very same rules (a change of ipset members only)
	}
	t.last, t.clean = chains, false
	next := make(map[string]*desiredChain, len(chains))
	names := make([]string, len(chains))
	for i := range chains {
		c := &chains[i]
		names[i] = c.Name
		if old, ok := t.desired[c.Name]; ok && sameRules(old.rules, c.Rules) {
			next[c.Name] = old
			continue
		}
		d := &desiredChain{rules: c.Rules, hashed: c.Hashed()}
		d.hashes = make([]string, len(d.hashed))
		for j, r := range d.hashed {
			d.hashes[j] = r.Hash
		}
		next[c.Name] = d
	}
	t.desired = next
	// Rendered chains come sorted by name; sort only if not.
	if !slices.IsSorted(names) {
		slices.Sort(names)
	}
	t.names = slices.Compact(names)
	t.hooks = slices.Clone(hooks)
}

// sameChains says whether b holds the very same chains as a: same names
// and the same rule slices (not compared element by element).
func sameChains(a, b []rules.Chain) bool {
	if len(a) != len(b) || a == nil || b == nil {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || len(a[i].Rules) != len(b[i].Rules) ||
			(len(a[i].Rules) > 0 && &a[i].Rules[0] != &b[i].Rules[0]) {
			return false
		}
	}
	return true
}

// sameRules is slices.Equal, short-cut for the common case of a renderer
// handing out the very same rules again.
func sameRules(a, b []rules.Rule) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// sameHashes is slices.Equal, short-cut for a chain whose applied hashes
// are the desired ones themselves.
func sameHashes(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// InvalidateCache makes the next Apply read the kernel's state first.
func (t *Table) InvalidateCache() { t.actual = nil }

// LastTransaction is the input of the last restore, for tests and logs.
func (t *Table) LastTransaction() string { return t.lastRestore }

var hashRE = regexp.MustCompile(`--comment "?cali:([A-Za-z0-9_-]{16})"?`)

func parseSave(table string, out []byte) *tableState {
	st := &tableState{chains: map[string][]string{}, base: map[string][]string{}}
	in := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			in = line[1:] == table
		case !in:
		case strings.HasPrefix(line, ":"):
			name, _, _ := strings.Cut(line[1:], " ")
			if strings.HasPrefix(name, rules.ChainPrefix) {
				if _, ok := st.chains[name]; !ok {
					st.chains[name] = []string{}
				}
			}
		case strings.HasPrefix(line, "-A "):
			name, rest, _ := strings.Cut(line[3:], " ")
			hash := ""
			if m := hashRE.FindStringSubmatch(rest); m != nil {
				hash = m[1]
			}
			if strings.HasPrefix(name, rules.ChainPrefix) {
				st.chains[name] = append(st.chains[name], hash)
			} else {
				st.base[name] = append(st.base[name], hash)
			}
		}
	}
	return st
}

// Stats says what one Apply did.
type Stats struct {
	ChainsWritten, ChainsDeleted, HooksFixed int
	Restores                                 int
}

// Apply brings the table to the desired state with at most one restore.
func (t *Table) Apply(ctx context.Context) (Stats, error) {
	var st Stats
	if t.clean && t.actual != nil {
		return st, nil
	}
	if t.actual == nil {
		out, err := t.run.Run(ctx, t.backend.Save, []string{"-t", t.name}, nil)
		if err != nil {
			return st, fmt.Errorf("reading table %s: %w", t.name, err)
		}
		t.actual = parseSave(t.name, out)
	}
	var decl, body, tail strings.Builder
	// What the table holds after a successful restore: the actual state
	// with the written chains replaced and the stale ones gone, applied in
	// place at the end so that an unchanged table costs no copy.
	written := map[string][]string{}
	nextBase := map[string][]string{}

	for _, name := range t.names {
		want := t.desired[name]
		if have, ok := t.actual.chains[name]; ok && sameHashes(have, want.hashes) {
			continue
		}
		written[name] = want.hashes
		st.ChainsWritten++
		fmt.Fprintf(&decl, ":%s - [0:0]\n", name)
		for _, r := range want.hashed {
			fmt.Fprintf(&body, "-A %s %s\n", name, r.Spec)
		}
	}
	var stale []string
	for name := range t.actual.chains {
		if _, ok := t.desired[name]; !ok {
			stale = append(stale, name)
		}
	}
	slices.Sort(stale)
	for _, name := range stale {
		st.ChainsDeleted++
		fmt.Fprintf(&decl, ":%s - [0:0]\n", name)
		fmt.Fprintf(&tail, "-X %s\n", name)
	}

	// Hooks: exactly one felix rule per base chain, at the top. Base
	// chains are read only for their cali-hashed rules.
	var hookLines strings.Builder
	wantHook := map[string]rules.HashedRule{}
	for _, h := range t.hooks {
		wantHook[h.Base] = h.Rule()
	}
	bases := map[string]bool{}
	for b := range wantHook {
		bases[b] = true
	}
	for b, hs := range t.actual.base {
		if slices.ContainsFunc(hs, func(h string) bool { return h != "" }) {
			bases[b] = true
		}
	}
	for _, b := range slices.Sorted(maps.Keys(bases)) {
		have := t.actual.base[b]
		want, wanted := wantHook[b]
		ours := 0
		for _, h := range have {
			if h != "" {
				ours++
			}
		}
		newBase := slices.Clone(have)
		pos := 0
		if t.appendHooks {
			pos = len(have) - 1
		}
		if wanted && ours == 1 && len(have) > 0 && have[pos] == want.Hash {
			nextBase[b] = newBase
			continue
		}
		st.HooksFixed++
		for i := len(have) - 1; i >= 0; i-- {
			if have[i] != "" {
				fmt.Fprintf(&hookLines, "-D %s %d\n", b, i+1)
				newBase = slices.Delete(newBase, i, i+1)
			}
		}
		switch {
		case wanted && t.appendHooks:
			fmt.Fprintf(&hookLines, "-A %s %s\n", b, want.Spec)
			newBase = append(newBase, want.Hash)
		case wanted:
			fmt.Fprintf(&hookLines, "-I %s 1 %s\n", b, want.Spec)
			newBase = slices.Insert(newBase, 0, want.Hash)
		}
		nextBase[b] = newBase
	}
	for b, hs := range t.actual.base {
		if _, ok := nextBase[b]; !ok {
			nextBase[b] = hs
		}
	}
	commit := func(deleted []string) {
		maps.Copy(t.actual.chains, written)
		for _, name := range deleted {
			delete(t.actual.chains, name)
		}
		t.actual.base = nextBase
	}

	if decl.Len() == 0 && hookLines.Len() == 0 && tail.Len() == 0 {
		commit(nil)
		t.clean = true
		return st, nil
	}
	var tx strings.Builder
	fmt.Fprintf(&tx, "*%s\n", t.name)
	tx.WriteString(decl.String())
	// Hooks go before the chain bodies so a deleted old hook never points
	// at a chain being removed, and after the declarations so a new hook's
	// target exists.
	tx.WriteString(hookLines.String())
	tx.WriteString(body.String())
	tx.WriteString(tail.String())
	tx.WriteString("COMMIT\n")
	t.lastRestore = tx.String()
	st.Restores++
	err := t.restore(ctx, tx.String())
	if err != nil && tail.Len() > 0 {
		// Deleting a stale chain fails while something felix does not own
		// still jumps to it; that must not block every other update. Retry
		// without the deletions: the stale chains stay, empty, and are
		// tried again on the next resync.
		retry := strings.Replace(tx.String(), tail.String(), "", 1)
		st.Restores++
		if err2 := t.restore(ctx, retry); err2 == nil {
			t.lastRestore = retry
			for _, name := range stale {
				written[name] = []string{}
			}
			st.ChainsDeleted = 0
			commit(nil)
			return st, fmt.Errorf("%w: %v", ErrStaleChainsKept, err)
		}
	}
	if err != nil {
		t.actual = nil
		return st, fmt.Errorf("restoring table %s: %w", t.name, err)
	}
	commit(stale)
	t.clean = true
	return st, nil
}

// ErrStaleChainsKept says an apply succeeded except for deleting chains
// felix no longer needs (still referenced by someone else's rules).
var ErrStaleChainsKept = errors.New("applied, but stale chains could not be deleted")

func (t *Table) restore(ctx context.Context, text string) error {
	_, err := t.run.Run(ctx, t.backend.Restore, []string{"--noflush", "--wait", "10"}, []byte(text))
	return err
}

func (t *Table) ruleCount() int {
	n := len(t.hooks)
	for _, d := range t.desired {
		n += len(d.hashed)
	}
	return n
}
