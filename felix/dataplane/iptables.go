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
	"time"

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
// comment). Each apply plans the change (planTable, pure) and executes it
// as one transaction. A chain the kernel refuses does not stop the
// others: a failed transaction is retried without stale-chain deletions,
// then re-planned from a fresh read of the table and written chain by
// chain (by halves); the chains that still fail are recorded as failed,
// retried with backoff, and replaced meanwhile by a chain that drops
// everything (dropChain). Rules that match an ipset the ipset driver
// could not program fail closed (failClosed, see SetFailedSets). It is
// not safe for concurrent use; Dataplane serialises it.
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
	// failedSets are the ipsets that could not be programmed; failed
	// are this table's chains that could not be.
	failedSets map[string]bool
	failed     *failures
	now        func() time.Time
}

type tableState struct {
	// chains maps each cali- chain to its rules' hashes ("" for a rule
	// without one).
	chains map[string][]string
	// base maps each base chain a hook goes into to the hashes of its
	// rules, "" for rules felix does not own.
	base map[string][]string
}

// desiredChain is one chain's rules, rendered and hashed once. It is not
// modified once made (but for sets, a memo).
type desiredChain struct {
	rules  []rules.Rule
	hashed []rules.HashedRule
	hashes []string
	sets   []string // the ipsets the rules match (usedSets)
}

// NewTable returns a driver for table ("filter") using backend's binaries.
func NewTable(table string, backend Backend, run Runner) *Table {
	return &Table{name: table, backend: backend, run: run, desired: map[string]*desiredChain{},
		failed: newFailures(0, 0), now: time.Now}
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
		next[c.Name] = newDesiredChain(*c)
	}
	t.desired = next
	t.failed.keepOnly(func(name string) bool { return next[name] != nil })
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

// SetFailedSets names the ipsets that could not be programmed: the rules
// matching them fail closed (see failClosed) until they are programmed.
func (t *Table) SetFailedSets(names []string) {
	if len(names) == 0 && len(t.failedSets) == 0 {
		return
	}
	next := make(map[string]bool, len(names))
	for _, n := range names {
		next[n] = true
	}
	if !maps.Equal(next, t.failedSets) {
		t.failedSets, t.clean = next, false
	}
}

// FailedChains are the chains that could not be programmed (sorted).
func (t *Table) FailedChains() []string { return t.failed.names() }

// programmed is the kernel's rule hashes of chain name (as last read or
// written; shared, not to be modified) and whether they are the desired chain's (see
// Dataplane.programmedChain).
func (t *Table) programmed(name string) (hashes []string, ok bool) {
	if t.actual == nil {
		return nil, false
	}
	hashes, there := t.actual.chains[name]
	d := t.desired[name]
	return hashes, there && d != nil && !t.failed.has(name) && sameHashes(hashes, d.hashes)
}

// chain is what stands for desired chain name at now: the desired chain,
// with the rules matching failed ipsets failing closed; or, while the
// chain itself fails and its retry is not due, a chain dropping all.
func (t *Table) chain(name string, now time.Time) *desiredChain {
	d := t.desired[name]
	if t.failed.has(name) && t.failed.skip(name, d, now) {
		return dropChain(t.name, name)
	}
	if len(t.failedSets) > 0 {
		if fc := failClosed(t.name, name, d, t.failedSets); fc != nil {
			return fc
		}
	}
	return d
}

// plan plans the next apply at now.
func (t *Table) plan(now time.Time, keepStale bool) tablePlan {
	return planTable(planInput{
		table: t.name, actual: t.actual, names: t.names,
		chain:  func(name string) *desiredChain { return t.chain(name, now) },
		wanted: func(name string) bool { return t.desired[name] != nil },
		hooks:  t.hooks, appendHooks: t.appendHooks, keepStale: keepStale,
	})
}

// commit records that plan p is in the kernel.
func (t *Table) commit(p *tablePlan) {
	for _, w := range p.writes {
		t.actual.chains[w.name] = w.chain.hashes
	}
	for _, name := range p.stale {
		if p.keepStale {
			t.actual.chains[name] = []string{}
		} else {
			delete(t.actual.chains, name)
		}
	}
	t.actual.base = p.nextBase
}

func (t *Table) read(ctx context.Context) error {
	if t.actual != nil {
		return nil
	}
	out, err := t.run.Run(ctx, t.backend.Save, []string{"-t", t.name}, nil)
	if err != nil {
		return fmt.Errorf("reading table %s: %w", t.name, err)
	}
	t.actual = parseSave(t.name, out)
	return nil
}

// Apply brings the table to the desired state, with one restore when all
// goes well. Chains that could not be programmed are in an error wrapping
// ErrUnprogrammed (and FailedChains); everything else was applied.
func (t *Table) Apply(ctx context.Context) (Stats, error) {
	if t.clean && t.actual != nil {
		return Stats{}, nil
	}
	if err := t.read(ctx); err != nil {
		return Stats{}, err
	}
	now := t.now()
	p := t.plan(now, false)
	st := p.stats()
	if !p.empty() {
		st.Restores++
		if err := t.restore(ctx, p.text()); err != nil {
			return t.retry(ctx, err, now, st, len(p.stale) > 0)
		}
	}
	t.commit(&p)
	t.settle(now)
	t.clean = len(t.failed.objs) == 0
	return st, nil
}

// settle forgets the failures of the chains retried at now that the
// kernel now holds as desired.
func (t *Table) settle(now time.Time) {
	for _, name := range t.failed.names() {
		if !t.failed.skip(name, t.desired[name], now) && sameHashes(t.actual.chains[name], t.chain(name, now).hashes) {
			t.failed.programmed(name)
		}
	}
}

// retry follows a failed transaction (first). Deleting a stale chain
// fails while something felix does not own still jumps to it, which must
// not block every other update: the apply is planned again keeping stale
// chains (flushed; their deletion is tried again on the next apply). If
// that is not it, see isolate.
func (t *Table) retry(ctx context.Context, first error, now time.Time, st Stats, hadStale bool) (Stats, error) {
	if hadStale {
		p := t.plan(now, true)
		st.Restores++
		if err := t.restore(ctx, p.text()); err == nil {
			t.commit(&p)
			t.settle(now)
			rs := p.stats()
			rs.Restores = st.Restores
			return rs, fmt.Errorf("%w: %v", ErrStaleChainsKept, first)
		}
	}
	t.actual = nil
	if ctx.Err() != nil {
		return st, fmt.Errorf("restoring table %s: %w", t.name, first)
	}
	return t.isolate(ctx, first, now, st)
}

// isolate reads the table again (it may have changed behind felix's
// back) and writes the plan in parts: the chains it creates first
// (empty), then the chain bodies by halves until each failing chain is
// alone, then, with the failing chains recorded as failed (and so planned
// as drop-all chains), the rest (hooks, failed chains, stale chains) in a
// last transaction. Only that one failing, or a read, is an error of the
// table as a whole.
func (t *Table) isolate(ctx context.Context, first error, now time.Time, st Stats) (Stats, error) {
	fail := func(err error) (Stats, error) {
		t.actual = nil
		return st, fmt.Errorf("restoring table %s: %w", t.name, errors.Join(first, err))
	}
	if err := t.read(ctx); err != nil {
		return fail(err)
	}
	p := t.plan(now, true)
	st.Restores++
	if err := t.restore(ctx, declareText(t.name, p.writes, t.actual)); err != nil {
		return fail(err)
	}
	for _, w := range p.writes {
		if _, ok := t.actual.chains[w.name]; !ok {
			t.actual.chains[w.name] = []string{}
		}
	}
	failed := map[string]error{}
	var try func(ws []chainWrite)
	try = func(ws []chainWrite) {
		if len(ws) == 0 {
			return
		}
		st.Restores++
		err := t.restore(ctx, writesText(t.name, ws))
		switch {
		case err == nil:
			for _, w := range ws {
				t.actual.chains[w.name] = w.chain.hashes
			}
		case len(ws) == 1 || ctx.Err() != nil:
			for _, w := range ws {
				failed[w.name] = err
			}
		default:
			try(ws[:len(ws)/2])
			try(ws[len(ws)/2:])
		}
	}
	try(p.writes)
	if ctx.Err() != nil {
		return fail(ctx.Err())
	}
	names := slices.Sorted(maps.Keys(failed))
	for _, name := range names {
		t.failed.failed(name, t.desired[name], failed[name], now)
	}
	last := t.plan(now, true)
	if !last.empty() {
		st.Restores++
		if err := t.restore(ctx, last.text()); err != nil {
			return fail(err)
		}
	}
	t.commit(&last)
	t.settle(now)
	st.ChainsWritten = len(p.writes)
	st.HooksFixed = p.hooksFixed
	if len(names) > 0 {
		return st, fmt.Errorf("%w: table %s chains %s: %v", ErrUnprogrammed, t.name, strings.Join(names, ", "), failed[names[0]])
	}
	return st, nil
}

// ErrStaleChainsKept says an apply succeeded except for deleting chains
// felix no longer needs (still referenced by someone else's rules).
var ErrStaleChainsKept = errors.New("applied, but stale chains could not be deleted")

func (t *Table) restore(ctx context.Context, text string) error {
	t.lastRestore = text
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
