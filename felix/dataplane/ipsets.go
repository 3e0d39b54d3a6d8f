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

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// IPSets reconciles the ipsets felix owns (names starting cali4 or cali6)
// in one network namespace, both IP versions. Not safe for concurrent use;
// Dataplane serialises it.
type IPSets struct {
	run Runner
	// members, when the runner can, writes an apply that only changes
	// members of existing sets without an ipset process.
	members IPSetMembers
	// filler, when the runner can, fills the sets an apply creates when
	// they have batchFill members or more.
	filler IPSetFiller

	desired map[string]*setState
	actual  map[string]*setState // nil: unknown
}

type setState struct {
	typ, family string
	// members is the content as a set (normalised); for a desired state
	// it is nil until memberSet builds it from spec.
	members map[string]bool
	spec    calc.MemberList // the desired spec's members, to skip rebuilding unchanged sets
	// version is the renderer's version of the members (0: none).
	version uint64
	// ops are the members changed by patch in a desired state that also
	// stands for the kernel's (actual[name] == desired[name]), each with
	// whether the kernel has it: the kernel differs from members in (at
	// most) these until the next ApplyUpdates.
	ops map[string]bool
	// patched says ops came from a renderer's change (counted in
	// ApplyUpdates' result).
	patched bool
}

// NewIPSets returns the ipset driver. When run also implements
// IPSetMembers, applies that only add and delete members of sets the
// kernel has are written through it; everything else is written with
// `ipset -exist restore`.
func NewIPSets(run Runner) *IPSets {
	m, _ := run.(IPSetMembers)
	f, _ := run.(IPSetFiller)
	return &IPSets{run: run, members: m, filler: f, desired: map[string]*setState{}}
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
// the change alone; any other set is compared with the desired members.
func (s *IPSets) Update(specs []rules.IPSetSpec, versions map[string]uint64, changes map[string]rules.IPSetChange) {
	next := make(map[string]*setState, len(specs))
	for _, sp := range specs {
		v := versions[sp.Name]
		if old, ok := s.desired[sp.Name]; ok && old.typ == string(sp.Type) && old.family == sp.Family {
			if v != 0 && old.version == v {
				next[sp.Name] = old
				continue
			}
			if ch, ok := changes[sp.Name]; ok && v != 0 && old.version == ch.Since {
				s.patch(sp.Name, old, ch)
				old.version, old.spec = v, sp.Members
				next[sp.Name] = old
				continue
			}
			if v == 0 && old.version == 0 && old.spec.Equal(sp.Members) {
				next[sp.Name] = old
				continue
			}
		}
		// The members as a set are built when first needed (a compare
		// or a patch): a set only ever written whole never needs them.
		next[sp.Name] = &setState{typ: string(sp.Type), family: sp.Family, spec: sp.Members, version: v}
	}
	// A patched state no longer desired as it is still stands for the
	// kernel's content: undo its patches so that it does again.
	for name, old := range s.desired {
		if next[name] != old && len(old.ops) > 0 {
			old.memberSet()
			for m, had := range old.ops {
				if had {
					old.members[m] = true
				} else {
					delete(old.members, m)
				}
			}
			old.ops = nil
		}
	}
	s.desired = next
}

// memberSet is st's members as a set, built from spec on first use.
func (st *setState) memberSet() map[string]bool {
	if st.members == nil {
		st.members = make(map[string]bool, st.spec.Len())
		for m := range st.spec.All() {
			st.members[normalise(m)] = true
		}
	}
	return st.members
}

// sorted is st's members in order, normalised: from spec (sorted already)
// while no set of them was built.
func (st *setState) sorted() iter.Seq[string] {
	if st.members != nil {
		return slices.Values(slices.Sorted(maps.Keys(st.members)))
	}
	return func(yield func(string) bool) {
		for m := range st.spec.All() {
			if !yield(normalise(m)) {
				return
			}
		}
	}
}

// count is the number of st's members.
func (st *setState) count() int {
	if st.members != nil {
		return len(st.members)
	}
	return st.spec.Len()
}

// patch applies a renderer's member change to the desired state st of
// set name; when st also stands for the kernel's content, the change is
// kept as the kernel's to-do.
func (s *IPSets) patch(name string, st *setState, ch rules.IPSetChange) {
	shared := s.actual != nil && s.actual[name] == st
	if shared && st.ops == nil {
		st.ops = map[string]bool{}
	}
	st.patched = true
	// Without a set of the members, st.spec (replaced by the caller with
	// the changed list) stands for them: only the kernel's to-do is kept.
	note := func(m string) {
		if _, seen := st.ops[m]; shared && !seen {
			st.ops[m] = st.has(m)
		}
	}
	for _, m := range ch.Removed {
		m = normalise(m)
		note(m)
		if st.members != nil {
			delete(st.members, m)
		}
	}
	for _, m := range ch.Added {
		m = normalise(m)
		note(m)
		if st.members != nil {
			st.members[m] = true
		}
	}
}

// has says whether m (normalised) is one of st's members.
func (st *setState) has(m string) bool {
	if st.members != nil {
		return st.members[m]
	}
	// The members are spec's, normalised: m is one if spec holds it as
	// it is or with the prefix length normalise takes off.
	if normalise(m) == m && st.spec.Has(m) {
		return true
	}
	if strings.Contains(m, ":") {
		return st.spec.Has(m + "/128")
	}
	return st.spec.Has(m + "/32")
}

// InvalidateCache makes the next apply read the kernel's sets first.
func (s *IPSets) InvalidateCache() { s.actual = nil }

func parseIPSetSave(out []byte) map[string]*setState {
	sets := map[string]*setState{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 3 || !owned(f[1]) {
			continue
		}
		switch f[0] {
		case "create":
			st := &setState{typ: f[2], family: "inet", members: map[string]bool{}}
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
		s.actual = nil
		return fmt.Errorf("restoring ipsets: %w", err)
	}
	return nil
}

// newMembers is the number of members of the desired sets the kernel does
// not have.
func (s *IPSets) newMembers() int {
	n := 0
	for name, want := range s.desired {
		if _, ok := s.actual[name]; !ok {
			n += want.count()
		}
	}
	return n
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
// number of sets written.
func (s *IPSets) ApplyUpdates(ctx context.Context) (int, error) {
	a, err := s.applyUpdates(ctx)
	return a.written, err
}

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

// applyUpdates is ApplyUpdates, saying more about what it wrote.
func (s *IPSets) applyUpdates(ctx context.Context) (setsApplied, error) {
	if err := s.read(ctx); err != nil {
		return setsApplied{}, err
	}
	var b strings.Builder
	written := 0
	// onlyMembers stays true while the script only adds and deletes
	// members of sets the kernel has, which updates says again for
	// IPSetMembers.
	onlyMembers := true
	var updates []IPSetMemberUpdate
	changes := 0
	member := func(name string, st *setState, del, add []string) {
		updates = append(updates, IPSetMemberUpdate{Set: name, Type: calc.IPSetType(st.typ), Family: st.family, Del: del, Add: add})
		changes += len(del) + len(add)
	}
	// Leftover scratch sets of an interrupted sync.
	for _, name := range slices.Sorted(maps.Keys(s.actual)) {
		if isTemp(name) {
			onlyMembers = false
			fmt.Fprintf(&b, "destroy %s\n", name)
		}
	}
	tmp, patched := 0, 0
	inSync := map[string]bool{} // content already right: adopt the desired state as actual
	// fills: the members of the sets created here, when the filler
	// writes them after the restore that creates the sets.
	var fills []IPSetMemberUpdate
	if s.filler != nil && s.newMembers() >= batchFill {
		fills = []IPSetMemberUpdate{}
	}
	for _, name := range slices.Sorted(maps.Keys(s.desired)) {
		want := s.desired[name]
		have, ok := s.actual[name]
		if ok && have == want {
			// Written from this very desired state, not re-read since:
			// only the changes patched in since are missing.
			var add, del []string
			for _, m := range slices.Sorted(maps.Keys(want.ops)) {
				switch now := want.has(m); {
				case now && !want.ops[m]:
					add = append(add, m)
					writeMember(&b, "add", name, m)
				case !now && want.ops[m]:
					del = append(del, m)
					writeMember(&b, "del", name, m)
				}
			}
			if len(add)+len(del) > 0 {
				written++
				if want.patched {
					patched++
				}
				member(name, want, del, add)
			}
			continue
		}
		spec := rules.IPSetSpec{Type: calc.IPSetType(want.typ), Family: want.family}
		create := spec.CreateLine
		switch {
		case !ok && fills != nil:
			onlyMembers = false
			written++
			fmt.Fprintf(&b, "%s\n", sized(create(name), want.count()))
			fills = append(fills, IPSetMemberUpdate{Set: name, Type: calc.IPSetType(want.typ), Family: want.family, Add: slices.Collect(want.sorted())})
		case !ok:
			onlyMembers = false
			written++
			fmt.Fprintf(&b, "%s\n", sized(create(name), want.count()))
			for m := range want.sorted() {
				writeMember(&b, "add", name, m)
			}
		case have.typ != want.typ || have.family != want.family:
			// Cannot swap across types: replace (fails, and is retried,
			// while iptables still references the old set).
			onlyMembers = false
			written++
			fmt.Fprintf(&b, "destroy %s\n%s\n", name, sized(create(name), want.count()))
			for m := range want.sorted() {
				writeMember(&b, "add", name, m)
			}
		default:
			var add, del []string
			haveSet := have.memberSet()
			for m := range want.memberSet() {
				if !haveSet[m] {
					add = append(add, m)
				}
			}
			for m := range have.memberSet() {
				if !want.members[m] {
					del = append(del, m)
				}
			}
			if len(add) == 0 && len(del) == 0 {
				inSync[name] = true
				continue
			}
			written++
			if len(add)+len(del) <= 16 || len(add)+len(del) <= len(want.members)/4 {
				slices.Sort(del)
				slices.Sort(add)
				for _, m := range del {
					writeMember(&b, "del", name, m)
				}
				for _, m := range add {
					writeMember(&b, "add", name, m)
				}
				member(name, want, del, add)
				continue
			}
			// A big change: build the new content aside and swap it in, so
			// the rules see the old or the new set, never a mixture.
			onlyMembers = false
			t := tempName(want.family, tmp)
			tmp++
			fmt.Fprintf(&b, "%s\n", sized(create(t), want.count()))
			for m := range want.sorted() {
				writeMember(&b, "add", t, m)
			}
			fmt.Fprintf(&b, "swap %s %s\ndestroy %s\n", t, name, t)
		}
	}
	for name := range inSync {
		s.actual[name] = s.desired[name]
		s.desired[name].ops, s.desired[name].patched = nil, false
	}
	if b.Len() == 0 {
		return setsApplied{}, nil
	}
	done := setsApplied{written: written, patched: patched}
	if onlyMembers && s.members != nil && changes <= maxInProcessMembers {
		err := s.members.UpdateIPSetMembers(ctx, updates)
		switch {
		case err == nil:
			done.inProcess = true
		case !errors.Is(err, ErrMembersUnsupported):
			// As for a failed restore: the kernel may hold part of the
			// changes; the next apply reads it again.
			s.actual = nil
			return setsApplied{}, fmt.Errorf("updating ipset members: %w", err)
		}
	}
	if !done.inProcess {
		if err := s.restore(ctx, b.String()); err != nil {
			return setsApplied{}, err
		}
	}
	filled, failed, err := s.fill(ctx, fills)
	if err != nil {
		return setsApplied{}, err
	}
	done.filled, done.fillFailed = filled, failed
	// The kernel now holds exactly the desired sets; desired states are
	// modified only through patch, which keeps what the kernel then lacks
	// in ops, so they can stand for the actual ones.
	for name, want := range s.desired {
		s.actual[name] = want
		want.ops, want.patched = nil, false
	}
	for name := range s.actual {
		if isTemp(name) {
			delete(s.actual, name)
		}
	}
	return done, nil
}

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
