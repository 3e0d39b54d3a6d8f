package dataplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// IPSets reconciles the ipsets felix owns (names starting cali4 or cali6)
// in one network namespace, both IP versions. Each apply plans the change
// (planSets, pure) and then writes it: through IPSetMembers when it only
// adds and deletes members, else one `ipset -exist restore`. A set the
// kernel refuses does not stop the others: a failed write is re-planned
// from a fresh read of the kernel and written again, and if it fails
// again written set by set (by halves), and the sets that still fail are
// recorded as failed (FailedSets), retried with backoff, and left for the
// iptables driver to fail closed (their rules drop). Desired and actual
// states are separate: a desired state is never changed once made (a
// renderer's change makes a new one), and the actual one says which
// desired state the kernel was last written from. Not safe for
// concurrent use; Dataplane serialises it.
type IPSets struct {
	run Runner
	// members, when the runner can, writes an apply that only changes
	// members of existing sets without an ipset process.
	members IPSetMembers
	// filler, when the runner can, fills the sets an apply creates when
	// they have batchFill members or more.
	filler IPSetFiller

	desired map[string]*setState
	actual  map[string]*kernelSet // nil: unknown, read before the next apply
	failed  *failures
	now     func() time.Time
}

// setState is one desired set. It is not modified once made (but for
// members, a memo of spec).
type setState struct {
	typ, family string
	// spec are the members as rendered.
	spec calc.MemberList
	// version is the renderer's version of the members (0: none).
	version uint64
	// viaChanges says the renderer reached this state from its version
	// since by changing the members in touched (and nothing else), so
	// that a kernel written from that version needs only those looked at.
	viaChanges bool
	since      uint64
	touched    []string
	// members are spec's members in kernel form (see kernelForm), built
	// on first use.
	members map[string]bool
}

// kernelSet is what the kernel holds in one set: the members of the
// desired state it was last written from (from), or, read from the
// kernel, members.
type kernelSet struct {
	typ, family string
	from        *setState
	members     map[string]bool
}

// memberSet is the kernel's members as a set.
func (k *kernelSet) memberSet() map[string]bool {
	if k.from != nil {
		return k.from.memberSet()
	}
	return k.members
}

// NewIPSets returns the ipset driver. When run also implements
// IPSetMembers, applies that only add and delete members of sets the
// kernel has are written through it; everything else is written with
// `ipset -exist restore`.
func NewIPSets(run Runner) *IPSets {
	m, _ := run.(IPSetMembers)
	f, _ := run.(IPSetFiller)
	return &IPSets{run: run, members: m, filler: f, desired: map[string]*setState{},
		failed: newFailures(0, 0), now: time.Now}
}

// maxInProcessMembers bounds the member changes of an apply written
// through IPSetMembers (one netlink request and answer each, ~11 µs of
// CPU); past it one ipset restore (~0.9 ms for the process, then ~7 µs a
// member, as it sends them in big batches) is cheaper
// (BenchmarkPrivilegedIPSetMemberChange).
const maxInProcessMembers = 200

// batchFill is the number of members of the sets an apply creates from
// which they are filled through IPSetFiller (after an ipset restore that
// creates them): sets of 300,000 members in all took 0.34 s created and
// filled in netlink batches against 0.81 s for one `ipset restore`,
// which parses each line (BenchmarkPrivilegedIPSetFill).
const batchFill = 10_000

func owned(name string) bool {
	return strings.HasPrefix(name, rules.IPSetPrefix+"4") || strings.HasPrefix(name, rules.IPSetPrefix+"6")
}

// tempName is the scratch set used to rebuild set i of a sync before it is
// swapped in. Temp names never collide with real ones ("cali4t"/"cali6t").
func tempName(family string, i int) string {
	v := "4"
	if family == "inet6" {
		v = "6"
	}
	return fmt.Sprintf("%s%st%d", rules.IPSetPrefix, v, i)
}

func isTemp(name string) bool {
	return len(name) > 5 && name[5] == 't' && owned(name)
}

// normalise writes a member the way `ipset save` prints it: single-address
// networks without their prefix length.
func normalise(m string) string {
	if s, ok := strings.CutSuffix(m, "/32"); ok && !strings.Contains(s, ":") {
		return s
	}
	if s, ok := strings.CutSuffix(m, "/128"); ok && strings.Contains(s, ":") {
		return s
	}
	return m
}

// writeMember writes one `ipset restore` add or del line. A port
// member's protocol goes by its number: ipset looks a name up in
// /etc/protocols for every line, which made a restore of named-port sets
// two to three times slower (the kernel keeps the number; ipset save
// prints the name again).
func writeMember(b *strings.Builder, op, set, m string) {
	b.WriteString(op)
	b.WriteByte(' ')
	b.WriteString(set)
	b.WriteByte(' ')
	if ip, port, ok := strings.Cut(m, ","); ok {
		if proto, num, ok := strings.Cut(port, ":"); ok {
			if n, ok := portProtocols[proto]; ok {
				b.WriteString(ip)
				b.WriteByte(',')
				b.WriteString(strconv.Itoa(int(n)))
				b.WriteByte(':')
				b.WriteString(num)
				b.WriteByte('\n')
				return
			}
		}
	}
	b.WriteString(m)
	b.WriteByte('\n')
}

// sized gives a create line a hash size for n members (a power of two,
// at least the 1024 it names): a set created small is rehashed again and
// again while a restore fills it.
func sized(create string, n int) string {
	size := 1024
	for size < n/2 {
		size *= 2
	}
	if size == 1024 {
		return create
	}
	return strings.Replace(create, "hashsize 1024 ", "hashsize "+strconv.Itoa(size)+" ", 1)
}

// SetDesired replaces the desired sets (of both families).
func (s *IPSets) SetDesired(specs []rules.IPSetSpec) { s.Update(specs, nil, nil) }

// Update replaces the desired sets (of both families). versions and
// changes are a renderer's (rules.Ruleset.IPSetVersions/IPSetChanges, of
// all families): a set whose version is the one desired now is unchanged,
// and one whose change leads from the version desired now is updated by
// the change alone; any other set is compared with the kernel's members.
func (s *IPSets) Update(specs []rules.IPSetSpec, versions map[string]uint64, changes map[string]rules.IPSetChange) {
	next := make(map[string]*setState, len(specs))
	for _, sp := range specs {
		next[sp.Name] = s.nextState(sp, versions[sp.Name], changes)
	}
	s.desired = next
	s.failed.keepOnly(func(name string) bool { return next[name] != nil })
}

// nextState is the desired state of set sp at version v (0: none), given
// the one desired until now and the renderer's changes.
func (s *IPSets) nextState(sp rules.IPSetSpec, v uint64, changes map[string]rules.IPSetChange) *setState {
	old, ok := s.desired[sp.Name]
	fresh := &setState{typ: string(sp.Type), family: sp.Family, spec: sp.Members, version: v}
	if !ok || old.typ != fresh.typ || old.family != fresh.family {
		return fresh
	}
	if v != 0 && old.version == v {
		return old
	}
	if v == 0 && old.version == 0 && old.spec.Equal(sp.Members) {
		return old
	}
	ch, ok := changes[sp.Name]
	if !ok || v == 0 || old.version != ch.Since {
		return fresh
	}
	fresh.viaChanges, fresh.since = true, old.version
	// While the kernel has not been written from old, the changes since
	// the version it may hold go on counting.
	if have := s.actual[sp.Name]; old.viaChanges && (have == nil || have.from != old) {
		fresh.since, fresh.touched = old.since, slices.Clip(old.touched)
	}
	fresh.touched = append(append(fresh.touched, ch.Removed...), ch.Added...)
	if len(fresh.touched) > max(256, sp.Members.Len()/4) {
		// Cheaper to compare than to look each one up.
		fresh.viaChanges, fresh.since, fresh.touched = false, 0, nil
	}
	return fresh
}

// memberSet is st's members in kernel form, as a set, built on first use.
func (st *setState) memberSet() map[string]bool {
	if st.members == nil {
		st.members = make(map[string]bool, st.spec.Len())
		for m := range st.kernelMembers() {
			st.members[m] = true
		}
	}
	return st.members
}

// kernelMembers yields st's members in kernel form, in spec's order (a
// /0's halves may repeat a member given as well; ipset -exist does not
// mind).
func (st *setState) kernelMembers() iter.Seq[string] {
	return func(yield func(string) bool) {
		for m := range st.spec.All() {
			a, b := kernelForm(st.typ, m)
			if !yield(a) || (b != "" && !yield(b)) {
				return
			}
		}
	}
}

// count is the number of st's members (for a set's hash size).
func (st *setState) count() int { return st.spec.Len() }

// InvalidateCache makes the next apply read the kernel's sets first.
func (s *IPSets) InvalidateCache() { s.actual = nil }

func parseIPSetSave(out []byte) map[string]*kernelSet {
	sets := map[string]*kernelSet{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !owned(f[1]) {
			continue
		}
		switch f[0] {
		case "create":
			st := &kernelSet{typ: f[2], family: "inet", members: map[string]bool{}}
			for i := 3; i+1 < len(f); i++ {
				if f[i] == "family" {
					st.family = f[i+1]
				}
			}
			sets[f[1]] = st
		case "add":
			if st := sets[f[1]]; st != nil {
				st.members[f[2]] = true
			}
		}
	}
	return sets
}

func (s *IPSets) read(ctx context.Context) error {
	if s.actual != nil {
		return nil
	}
	out, err := s.run.Run(ctx, "ipset", []string{"save"}, nil)
	if err != nil {
		return fmt.Errorf("reading ipsets: %w", err)
	}
	s.actual = parseIPSetSave(out)
	return nil
}

func (s *IPSets) restore(ctx context.Context, script string) error {
	if _, err := s.run.Run(ctx, "ipset", []string{"-exist", "restore"}, []byte(script)); err != nil {
		return fmt.Errorf("restoring ipsets: %w", err)
	}
	return nil
}

// fill writes the members of the sets just created (fills) through the
// filler (filled); when it cannot (failed says why), one `ipset -exist
// restore` writes them.
func (s *IPSets) fill(ctx context.Context, fills []IPSetMemberUpdate) (filled bool, failed, err error) {
	if len(fills) == 0 {
		return false, nil, nil
	}
	failed = s.filler.FillIPSets(ctx, fills)
	if failed == nil {
		return true, nil, nil
	}
	var b strings.Builder
	for _, f := range fills {
		for _, m := range f.Add {
			writeMember(&b, "add", f.Set, m)
		}
	}
	if err := s.restore(ctx, b.String()); err != nil {
		return false, failed, fmt.Errorf("filling ipsets: %w (in-process: %v)", err, failed)
	}
	return false, failed, nil
}

// ApplyUpdates creates and updates the desired sets (stale ones stay until
// ApplyDeletions, after iptables stopped using them). It returns the
// number of sets written. Sets the kernel refused are in an error
// wrapping ErrUnprogrammed (and FailedSets); the others were written.
func (s *IPSets) ApplyUpdates(ctx context.Context) (int, error) {
	a, err := s.applyUpdates(ctx)
	return a.written, err
}

// FailedSets are the desired sets that could not be programmed (sorted):
// rules using them must fail closed.
func (s *IPSets) FailedSets() []string { return s.failed.names() }

// setsApplied describes what one applyUpdates wrote.
type setsApplied struct {
	// written sets, of which patched were updated by their members'
	// changes alone (no compare).
	written, patched int
	// inProcess says the sets were written through IPSetMembers (no
	// ipset process).
	inProcess bool
	// filled says the members of the sets created were written through
	// IPSetFiller; fillFailed is why the filler could not (they were
	// written by ipset restore instead).
	filled     bool
	fillFailed error
}

// plan plans the next write at now (failed sets not due are left alone).
func (s *IPSets) plan(now time.Time) setsPlan {
	return planSets(s.desired, s.actual, func(name string, st *setState) bool { return s.failed.skip(name, st, now) })
}

// applyUpdates is ApplyUpdates, saying more about what it wrote.
func (s *IPSets) applyUpdates(ctx context.Context) (setsApplied, error) {
	if err := s.read(ctx); err != nil {
		return setsApplied{}, err
	}
	now := s.now()
	p := s.plan(now)
	done, err := s.write(ctx, &p)
	if err == nil {
		s.commit(&p)
		return done, nil
	}
	// The kernel may hold part of the write: read it again.
	s.actual = nil
	if ctx.Err() != nil {
		return setsApplied{}, err
	}
	return s.recover(ctx, err, now)
}

// write executes plan p.
func (s *IPSets) write(ctx context.Context, p *setsPlan) (setsApplied, error) {
	if p.empty() {
		return setsApplied{}, nil
	}
	done := setsApplied{written: len(p.ops)}
	for i := range p.ops {
		if p.ops[i].patched {
			done.patched++
		}
	}
	if only, n := p.onlyMembers(); only && s.members != nil && n <= maxInProcessMembers {
		err := s.members.UpdateIPSetMembers(ctx, p.memberUpdates())
		if err == nil {
			done.inProcess = true
			return done, nil
		}
		if !errors.Is(err, ErrMembersUnsupported) {
			return setsApplied{}, fmt.Errorf("updating ipset members: %w", err)
		}
	}
	fill := s.filler != nil && p.newMembers() >= batchFill
	if err := s.restore(ctx, p.script(fill)); err != nil {
		return setsApplied{}, err
	}
	if fill {
		var err error
		if done.filled, done.fillFailed, err = s.fill(ctx, p.fills()); err != nil {
			return setsApplied{}, err
		}
	}
	return done, nil
}

// commit records that plan p was written: the kernel's sets are now the
// desired states the plan wrote (or found in place).
func (s *IPSets) commit(p *setsPlan) {
	for _, name := range p.temps {
		delete(s.actual, name)
	}
	adopt := func(name string, st *setState) {
		s.actual[name] = &kernelSet{typ: st.typ, family: st.family, from: st}
		s.failed.programmed(name)
	}
	for i := range p.ops {
		adopt(p.ops[i].name, p.ops[i].want)
	}
	for _, name := range p.same {
		adopt(name, s.desired[name])
	}
}

// recover follows a failed write (first): the kernel, read again, may
// hold part of it or have changed behind felix's back, so the apply is
// planned again and written with one ipset restore; if that fails too,
// the plan is written by halves until each failing set is alone, so that
// one set the kernel refuses does not stop the others. The sets that
// still fail are recorded as failed (retried with backoff) and named in
// the error, which wraps ErrUnprogrammed when everything else was
// written.
func (s *IPSets) recover(ctx context.Context, first error, now time.Time) (setsApplied, error) {
	if err := s.read(ctx); err != nil {
		return setsApplied{}, errors.Join(first, err)
	}
	p := s.plan(now)
	if err := s.restore(ctx, p.script(false)); err == nil {
		s.commit(&p)
		return setsApplied{written: len(p.ops)}, nil
	}
	if len(p.temps) > 0 {
		_ = s.restore(ctx, (&setsPlan{temps: p.temps}).script(false))
	}
	failed := map[string]error{}
	var try func(ops []setOp)
	try = func(ops []setOp) {
		err := s.restore(ctx, (&setsPlan{ops: ops}).script(false))
		switch {
		case err == nil:
		case len(ops) == 1 || ctx.Err() != nil:
			for _, op := range ops {
				failed[op.name] = err
			}
		default:
			try(ops[:len(ops)/2])
			try(ops[len(ops)/2:])
		}
	}
	try(p.ops)
	// What a failed set holds now is not known: read the kernel again
	// before the next plan.
	s.actual = nil
	if ctx.Err() != nil {
		return setsApplied{}, errors.Join(first, ctx.Err())
	}
	var names []string
	for _, op := range p.ops {
		if err, bad := failed[op.name]; bad {
			s.failed.failed(op.name, op.want, err, now)
			names = append(names, op.name)
		} else {
			s.failed.programmed(op.name)
		}
	}
	for _, name := range p.same {
		s.failed.programmed(name)
	}
	done := setsApplied{written: len(p.ops) - len(names)}
	if len(names) == 0 {
		return done, nil
	}
	return done, fmt.Errorf("%w: ipsets %s: %v", ErrUnprogrammed, strings.Join(names, ", "), failed[names[0]])
}

// ErrUnprogrammed says some objects (ipsets, chains) could not be
// programmed; everything else was. They are retried with backoff, and
// the rules that depend on them fail closed meanwhile.
var ErrUnprogrammed = errors.New("could not be programmed")

// ApplyDeletions destroys the owned sets that are no longer desired.
func (s *IPSets) ApplyDeletions(ctx context.Context) (int, error) {
	if err := s.read(ctx); err != nil {
		return 0, err
	}
	var b strings.Builder
	var gone []string
	for _, name := range slices.Sorted(maps.Keys(s.actual)) {
		if _, ok := s.desired[name]; !ok {
			fmt.Fprintf(&b, "destroy %s\n", name)
			gone = append(gone, name)
		}
	}
	if len(gone) == 0 {
		return 0, nil
	}
	if _, err := s.run.Run(ctx, "ipset", []string{"-exist", "restore"}, []byte(b.String())); err == nil {
		for _, name := range gone {
			delete(s.actual, name)
		}
		return len(gone), nil
	}
	// One set still in use (by a rule felix does not own) stops the batch:
	// destroy the others one by one and keep that one for a later try.
	deleted := 0
	var kept []string
	for _, name := range gone {
		if _, err := s.run.Run(ctx, "ipset", []string{"destroy", name}, nil); err != nil {
			kept = append(kept, name)
			continue
		}
		delete(s.actual, name)
		deleted++
	}
	if len(kept) > 0 {
		return deleted, fmt.Errorf("%w: %s", ErrStaleSetsKept, strings.Join(kept, ", "))
	}
	return deleted, nil
}

// ErrStaleSetsKept says sets felix no longer needs could not be destroyed
// (still referenced by someone else's rules); everything else was applied.
var ErrStaleSetsKept = errors.New("stale ipsets still in use were kept")
