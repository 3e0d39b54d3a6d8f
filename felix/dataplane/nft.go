package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/google/nftables/userdata"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// NftConn is the kernel side of the nftables driver: a google/nftables
// connection (a netlink socket in felix's namespace) that queues
// operations and commits them in one transaction on Flush.
type NftConn interface {
	AddTable(*nftables.Table) *nftables.Table
	DelTable(*nftables.Table)
	AddChain(*nftables.Chain) *nftables.Chain
	DelChain(*nftables.Chain)
	FlushChain(*nftables.Chain)
	AddRule(*nftables.Rule) *nftables.Rule
	AddSet(*nftables.Set, []nftables.SetElement) error
	DelSet(*nftables.Set)
	SetAddElements(*nftables.Set, []nftables.SetElement) error
	SetDeleteElements(*nftables.Set, []nftables.SetElement) error
	Flush() error
}

// nftDriver programs felix's rules as nftables: one table "calico" per
// IP family (Calico's layout: chains named <iptables table>-<chain>, base
// chains <table>-<HOOK> at Calico's priorities, Calico's ipsets as named
// sets), from the same rendered Rulesets the iptables driver takes.
//
// Every Apply is ONE nftables transaction for both families: chains
// whose rules changed are flushed and rewritten, new sets created with
// their elements, changed sets get their added and removed elements
// only, stale chains and sets deleted. The transaction is atomic, so a
// packet sees either the old or the new rules. What the driver wrote is
// remembered (the rule hashes of each chain, each set's elements), so an
// apply costs what changed. A full resync (the first apply, a refresh,
// after a failure) deletes and recreates the whole table inside the same
// transaction: drift made by others is repaired without a window in which
// packets see no rules. Only the two calico tables are ever touched.
//
// Not safe for concurrent use: the Dataplane calls it from Apply only.
type nftDriver struct {
	dial      NftDialer
	conn      NftConn // nil: dial before the next transaction
	closeConn func()
	log       *slog.Logger
	desired   map[int]*rules.Ruleset
	written   map[int]*nftWritten // nil entry: the kernel's table unknown
	// untranslatable counts rules that could not be translated and were
	// programmed as a DROP instead (fail closed).
	untranslatable int
}

// nftWritten is what the driver last committed for one family.
type nftWritten struct {
	// tables are the chains per iptables table (a base chain by its
	// hook's name), each shared with the next apply while its rendered
	// chains are the very same.
	tables map[string]*nftTableState
	sets   map[string]*nftSetState
}

// nftTableState is what the driver committed of one iptables table's
// chains; never modified once committed.
type nftTableState struct {
	rendered rules.TableRules // what the chains were planned from
	chains   map[string]nftChainState
}

type nftChainState struct {
	name   string      // the nftables chain name
	hashes []string    // shared with the renderer: never modified
	first  *rules.Rule // identity of the rendered rules, to skip rehashing
	n      int
	// failClosed: some of the rules could not be translated and a DROP
	// stands in for each, so the chain is not what felix rendered.
	failClosed bool
}

type nftSetState struct {
	typ     calc.IPSetType
	members calc.MemberList
	version uint64 // the renderer's version of members (0: unknown)
	// hostsOnly: every member is a host address (units = members).
	hostsOnly bool
	// units are an interval or ip,port set's elements; nil for a host
	// or ip,port set (a plain hash set, see isPlainSet), whose elements are its
	// members one to one.
	units nftUnitMap
	obj   *nftables.Set
}

func newNftDriver(dial NftDialer, log *slog.Logger) *nftDriver {
	return &nftDriver{dial: dial, log: log, desired: map[int]*rules.Ruleset{}, written: map[int]*nftWritten{}}
}

// fail forgets the connection (its unread replies must not be taken for
// the next transaction's) and what the kernel holds: the next apply
// rebuilds the tables.
func (n *nftDriver) fail() {
	if n.conn != nil {
		n.closeConn()
		n.conn, n.closeConn = nil, nil
	}
	n.Invalidate()
}

// SetDesired takes the rulesets to program next.
func (n *nftDriver) SetDesired(rss []*rules.Ruleset) {
	for _, rs := range rss {
		n.desired[rs.IPVersion] = rs
	}
}

// Invalidate makes the next Apply rebuild the tables from scratch.
func (n *nftDriver) Invalidate() { clear(n.written) }

func nftFamily(v int) nftables.TableFamily {
	if v == 6 {
		return nftables.TableFamilyIPv6
	}
	return nftables.TableFamilyIPv4
}

// nftFamilyPlan is one family's part of a transaction.
type nftFamilyPlan struct {
	v     int
	table *nftables.Table
	reset bool
	next  *nftWritten
	// rules to write per chain (the chain is flushed first unless new).
	newChains []*nftables.Chain
	writes    []nftChainWrite
	staleCh   []string // nftables names
	newSets   []*nftSetState
	setDel    map[string][]nftables.SetElement
	setAdd    map[string][]nftables.SetElement
	staleSets []string
	stats     Stats
}

type nftChainWrite struct {
	chain *nftables.Chain
	fresh bool
	rules []nftRuleOut
}

type nftRuleOut struct {
	hash string
	nr   rules.NftRule
}

// Apply commits the desired rulesets in one transaction.
func (n *nftDriver) Apply(ctx context.Context) (Stats, error) {
	var total Stats
	if n.conn == nil {
		c, closeConn, err := n.dial()
		if err != nil {
			return total, err
		}
		n.conn, n.closeConn = c, closeConn
		n.Invalidate()
	}
	plans, err := n.planAll()
	if errors.Is(err, errNftRebuild) {
		n.log.Info("nftables: rebuilding the tables", "reason", err)
		n.Invalidate()
		plans, err = n.planAll()
	}
	if err != nil {
		return total, err
	}
	for _, p := range plans {
		if err := n.encode(p); err != nil {
			n.fail()
			return total, err
		}
	}
	if err := n.conn.Flush(); err != nil {
		n.fail()
		return total, fmt.Errorf("nftables transaction: %w", err)
	}
	for _, p := range plans {
		n.written[p.v] = p.next
		total.ChainsWritten += p.stats.ChainsWritten
		total.ChainsDeleted += p.stats.ChainsDeleted
	}
	return total, nil
}

// errNftRebuild: a set must be created anew, which only a rebuild of the
// table can do (rules refer to the set): a hash set of host addresses now
// holds a network (it must become an interval set), or a set outgrew the
// size it was created with (see plainSetSize).
var errNftRebuild = errors.New("a set must be created anew")

// nftSizedSetMin is the member count from which a new plain set is given
// a size (see plainSetSize).
const nftSizedSetMin = 1024

// plainSetSize is the size a new plain set of n members is created with:
// none below nftSizedSetMin (the kernel's resizable hash, which starts
// with 4 buckets and grows), else room for twice n, for which the kernel
// picks its fixed-size hash with every bucket allocated at creation.
// Filling a resizable hash with 10^5 elements in one transaction runs
// every insert into its pending rehash (rhashtable_insert_slow: ~40% of
// the kernel's part of felix's first apply at 150,000 endpoints). A size
// is also a bound: a set that outgrows it is created anew, twice as
// large, by a rebuild of the tables (errNftRebuild), which is rare: it
// takes the set doubling since it was made.
func plainSetSize(n int) uint32 {
	if n < nftSizedSetMin {
		return 0
	}
	return uint32(2 * n)
}

// outgrown says whether a set of size size (0: unbounded) cannot hold n
// members.
func outgrown(size uint32, n int) bool { return size > 0 && n > int(size) }

// isPlainSet says whether set holds one element per member with no
// intervals: a set of host addresses (created while every member was a
// host address) or an ip,port set. Updates are O(1), where the kernel's
// interval (rbtree) sets cost tens of milliseconds per transaction once
// they hold ~10^5 elements.
func isPlainSet(set *nftables.Set) bool { return !set.Interval }

// planAll plans both families' parts of the transaction.
func (n *nftDriver) planAll() ([]*nftFamilyPlan, error) {
	var plans []*nftFamilyPlan
	for _, v := range []int{4, 6} {
		rs := n.desired[v]
		if rs == nil {
			continue
		}
		p, err := n.plan(v, rs)
		if err != nil {
			return nil, err
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// programmed is what the kernel holds of chain name of iptables table
// (IPv4), as the driver committed it: the rule hashes (shared: the
// caller must not modify them), and whether they are exactly the
// rendered rules (false for a chain not committed or with rules that
// could not be translated, dropping instead). It is called for every
// chain of every local endpoint after each apply, so it allocates
// nothing.
func (n *nftDriver) programmed(table, name string) (hashes []string, ok bool) {
	w := n.written[4]
	if w == nil {
		return nil, false
	}
	t := w.tables[table]
	if t == nil {
		return nil, false
	}
	st, there := t.chains[name]
	if !there {
		return nil, false
	}
	return st.hashes, !st.failClosed
}

// plan decides what one family's part of the transaction does.
func (n *nftDriver) plan(v int, rs *rules.Ruleset) (*nftFamilyPlan, error) {
	old := n.written[v]
	p := &nftFamilyPlan{v: v, table: &nftables.Table{Family: nftFamily(v), Name: rules.NftTable},
		reset: old == nil, setDel: map[string][]nftables.SetElement{}, setAdd: map[string][]nftables.SetElement{}}
	if old == nil {
		old = &nftWritten{tables: map[string]*nftTableState{}, sets: map[string]*nftSetState{}}
	}
	p.next = &nftWritten{tables: make(map[string]*nftTableState, len(old.tables)), sets: make(map[string]*nftSetState, len(old.sets))}
	if err := n.planSets(p, old, rs); err != nil {
		return nil, err
	}
	for _, t := range rs.Tables() {
		if err := n.planTable(p, old.tables[t.Name], t); err != nil {
			return nil, err
		}
	}
	for name, ot := range old.tables {
		if p.next.tables[name] == nil {
			for _, st := range ot.chains {
				p.staleCh = append(p.staleCh, st.name)
			}
		}
	}
	for name := range old.sets {
		if _, ok := p.next.sets[name]; !ok {
			p.staleSets = append(p.staleSets, name)
		}
	}
	slices.Sort(p.staleCh)
	slices.Sort(p.staleSets)
	p.stats.ChainsDeleted = len(p.staleCh)
	return p, nil
}

// planSets plans the set changes: unchanged member lists are skipped (by
// identity or the renderer's version), a renderer's member change is
// patched in when exact (patchUnits), anything else diffed element by
// element against the whole new list.
func (n *nftDriver) planSets(p *nftFamilyPlan, old *nftWritten, rs *rules.Ruleset) error {
	for _, spec := range rs.IPSets {
		name := rules.NftSetName(spec.Name)
		prev := old.sets[name]
		version := rs.IPSetVersions[spec.Name]
		if prev != nil && prev.typ == spec.Type && (prev.members.Same(spec.Members) || version != 0 && prev.version == version) {
			p.next.sets[name] = prev
			continue
		}
		if prev != nil && prev.typ != spec.Type {
			return fmt.Errorf("set %s changed type", spec.Name) // names carry the type
		}
		if prev != nil && isPlainSet(prev.obj) {
			if outgrown(prev.obj.Size, spec.Members.Len()) {
				return fmt.Errorf("set %s outgrew its size %d: %w", spec.Name, prev.obj.Size, errNftRebuild)
			}
			ch, exact := rs.IPSetChanges[spec.Name]
			exact = exact && version != 0 && prev.version == ch.Since
			del, add, ok := plainSetChange(prev.members, spec.Members, plainElement(spec.Type), ch, exact)
			if !ok {
				// A hash set cannot hold a network: the table is rebuilt
				// (in the same transaction) with an interval set instead.
				return fmt.Errorf("set %s gained a network: %w", spec.Name, errNftRebuild)
			}
			p.setDel[name], p.setAdd[name] = del, add
			p.next.sets[name] = &nftSetState{typ: spec.Type, members: spec.Members, version: version, hostsOnly: prev.hostsOnly, obj: prev.obj}
			continue
		}
		if prev == nil && (spec.Type == calc.HashIPPort || spec.Type == calc.HashNet && allHosts(spec.Members)) {
			keyType, _, err := nftSetType(string(spec.Type), p.v)
			if err != nil {
				return err
			}
			st := &nftSetState{typ: spec.Type, members: spec.Members, version: version, hostsOnly: spec.Type == calc.HashNet,
				obj: &nftables.Set{Table: p.table, Name: name, KeyType: keyType, Concatenation: spec.Type == calc.HashIPPort,
					Size: plainSetSize(spec.Members.Len())}}
			p.newSets = append(p.newSets, st)
			p.next.sets[name] = st
			continue
		}
		if prev != nil {
			if ch, ok := rs.IPSetChanges[spec.Name]; ok && version != 0 && prev.version == ch.Since {
				// The units map is patched in place: a failed
				// transaction rebuilds everything anyway.
				if del, add, ok := patchUnits(prev.hostsOnly, prev.units, ch); ok {
					p.setDel[name], p.setAdd[name] = del, add
					p.next.sets[name] = &nftSetState{typ: spec.Type, members: spec.Members, version: version,
						hostsOnly: prev.hostsOnly, units: prev.units, obj: prev.obj}
					continue
				}
			}
		}
		units, hostsOnly, err := nftUnits(spec.Members)
		if err != nil {
			return fmt.Errorf("set %s: %w", spec.Name, err)
		}
		st := &nftSetState{typ: spec.Type, members: spec.Members, version: version, units: units, hostsOnly: hostsOnly}
		if prev == nil {
			keyType, _, err := nftSetType(string(spec.Type), p.v)
			if err != nil {
				return err
			}
			st.obj = &nftables.Set{Table: p.table, Name: name, KeyType: keyType, Interval: true}
			p.newSets = append(p.newSets, st)
		} else {
			st.obj = prev.obj
			p.setDel[name], p.setAdd[name] = unitDiff(prev.units, units)
		}
		p.next.sets[name] = st
	}
	return nil
}

// planTable plans the chains of table t whose rules changed, base chains
// (the hooks) included, and the removal of its chains no longer rendered.
// A table whose rendered chains are the very same as old's (a change of
// set members only, or of other tables) is kept as it is without a look
// at its chains.
func (n *nftDriver) planTable(p *nftFamilyPlan, old *nftTableState, t rules.NamedTable) error {
	if !p.reset && old != nil && sameTableRules(old.rendered, t.TableRules) {
		p.next.tables[t.Name] = old
		return nil
	}
	if old == nil {
		old = &nftTableState{chains: map[string]nftChainState{}}
	}
	next := &nftTableState{rendered: t.TableRules, chains: make(map[string]nftChainState, len(old.chains))}
	p.next.tables[t.Name] = next
	for i := range t.Chains {
		c := &t.Chains[i]
		n.planChain(p, old, next, t.Name, c.Name, c, nil)
	}
	if err := n.planHooks(p, old, next, t); err != nil {
		return err
	}
	for name, st := range old.chains {
		if _, ok := next.chains[name]; !ok {
			p.staleCh = append(p.staleCh, st.name)
		}
	}
	return nil
}

// planHooks plans table t's base chains: one per hook, jumping to the
// hooks' targets in order.
func (n *nftDriver) planHooks(p *nftFamilyPlan, old, next *nftTableState, t rules.NamedTable) error {
	bases := map[string]*rules.Chain{}
	var order []string
	for _, h := range t.Hooks {
		bc := bases[h.Base]
		if bc == nil {
			bc = &rules.Chain{Name: h.Base}
			bases[h.Base] = bc
			order = append(order, h.Base)
		}
		bc.Rules = append(bc.Rules, rules.Rule{Action: "-j " + h.Target})
	}
	for _, base := range order {
		spec, err := nftBaseChainFor(t.Name, base)
		if err != nil {
			return err
		}
		n.planChain(p, old, next, t.Name, base, bases[base], &spec)
	}
	return nil
}

// sameTableRules says whether b holds the very same rendered chains and
// hooks as a (the renderer hands out the same rule slices for chains it
// did not change; see sameChains).
func sameTableRules(a, b rules.TableRules) bool {
	if !slices.Equal(a.Hooks, b.Hooks) {
		return false
	}
	return len(a.Chains) == 0 && len(b.Chains) == 0 || sameChains(a.Chains, b.Chains)
}

// planChain plans chain c of iptables table table, named chain there
// (a base chain: its hook's name, base its layout).
func (n *nftDriver) planChain(p *nftFamilyPlan, old, next *nftTableState, table, chain string, c *rules.Chain, base *nftBaseChain) {
	prev, had := old.chains[chain]
	var first *rules.Rule
	if len(c.Rules) > 0 {
		first = &c.Rules[0]
	}
	if had && base == nil && first != nil && prev.first == first && prev.n == len(c.Rules) {
		next.chains[chain] = prev
		return
	}
	hashed := c.Hashed()
	hashes := make([]string, len(hashed))
	for i, h := range hashed {
		hashes[i] = h.Hash
	}
	if had && slices.Equal(prev.hashes, hashes) {
		next.chains[chain] = nftChainState{name: prev.name, hashes: hashes, first: first, n: len(c.Rules), failClosed: prev.failClosed}
		return
	}
	name := rules.NftChainName(table, chain)
	ch := &nftables.Chain{Table: p.table, Name: name}
	if base != nil {
		ch.Type, ch.Hooknum, ch.Priority = base.Type, base.Hook, base.Priority
		policy := nftables.ChainPolicyAccept
		ch.Policy = &policy
	}
	if !had {
		p.newChains = append(p.newChains, ch)
	}
	w := nftChainWrite{chain: ch, fresh: !had}
	out, errs := rules.NftChainRules(table, p.v, c.Rules)
	for i, err := range errs {
		n.untranslatable++
		n.log.Error("nftables: a rule cannot be translated; dropping what reaches it instead (fail closed)",
			"chain", name, "rule", c.Rules[i].Match+" "+c.Rules[i].Action, "error", err)
		drop, _ := rules.NftRules(table, p.v, rules.Rule{Action: "-j DROP"})
		out = append(out, rules.NftIndexedRule{Index: i, Rule: drop[0]})
	}
	if len(errs) > 0 {
		slices.SortStableFunc(out, func(a, b rules.NftIndexedRule) int { return a.Index - b.Index })
	}
	next.chains[chain] = nftChainState{name: name, hashes: hashes, first: first, n: len(c.Rules), failClosed: len(errs) > 0}
	for _, r := range out {
		w.rules = append(w.rules, nftRuleOut{hash: hashes[r.Index], nr: r.Rule})
	}
	p.writes = append(p.writes, w)
	p.stats.ChainsWritten++
}

// encode queues the plan's operations on the connection in a safe order:
// the table (recreated on a reset), new sets, element changes, new
// chains (so that jumps to them resolve), rewritten chains, then the
// removal of stale chains (flushed first) and sets.
func (n *nftDriver) encode(p *nftFamilyPlan) error {
	if p.reset {
		n.conn.AddTable(p.table)
		n.conn.DelTable(p.table)
		n.conn.AddTable(p.table)
	}
	for _, st := range p.newSets {
		if err := n.conn.AddSet(st.obj, nil); err != nil {
			return fmt.Errorf("set %s: %w", st.obj.Name, err)
		}
		add := func(c []nftables.SetElement) error { return n.conn.SetAddElements(st.obj, c) }
		write := func() error { return unitChunks(st.units, add) }
		if isPlainSet(st.obj) {
			write = func() error { return plainChunks(st.members, plainElement(st.typ), add) }
		}
		if err := write(); err != nil {
			return fmt.Errorf("set %s: %w", st.obj.Name, err)
		}
	}
	for name, del := range p.setDel {
		obj := p.next.sets[name].obj
		if err := inChunks(del, func(c []nftables.SetElement) error { return n.conn.SetDeleteElements(obj, c) }); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	for name, add := range p.setAdd {
		obj := p.next.sets[name].obj
		if err := inChunks(add, func(c []nftables.SetElement) error { return n.conn.SetAddElements(obj, c) }); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
	}
	for _, ch := range p.newChains {
		n.conn.AddChain(ch)
	}
	for _, w := range p.writes {
		if !w.fresh {
			n.conn.FlushChain(w.chain)
		}
		for _, r := range w.rules {
			if r.nr.VMap != nil {
				if err := n.addVMap(p.table, r.nr); err != nil {
					return fmt.Errorf("chain %s: %w", w.chain.Name, err)
				}
			}
			for _, ref := range r.nr.Sets {
				if st := p.next.sets[ref.Lookup.SetName]; st != nil {
					ref.Lookup.SetID = st.obj.ID
				}
			}
			n.conn.AddRule(&nftables.Rule{Table: p.table, Chain: w.chain, Exprs: r.nr.Exprs,
				UserData: userdata.AppendString(nil, userdata.TypeComment, "cali:"+r.hash)})
		}
	}
	for _, name := range p.staleCh {
		n.conn.FlushChain(&nftables.Chain{Table: p.table, Name: name})
	}
	for _, name := range p.staleCh {
		n.conn.DelChain(&nftables.Chain{Table: p.table, Name: name})
	}
	for _, name := range p.staleSets {
		n.conn.DelSet(&nftables.Set{Table: p.table, Name: name})
	}
	return nil
}

// addVMap creates the anonymous verdict map of a dispatch rule and
// points the rule's lookup at it.
func (n *nftDriver) addVMap(table *nftables.Table, nr rules.NftRule) error {
	set := &nftables.Set{Table: table, Anonymous: true, Constant: true, IsMap: true,
		KeyType: nftables.TypeIFName, DataType: nftables.TypeVerdict}
	elems := make([]nftables.SetElement, len(nr.VMap.Ifaces))
	for i, iface := range nr.VMap.Ifaces {
		elems[i] = nftables.SetElement{Key: rules.NftIfaceKey(iface),
			VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: nr.VMap.Chains[i]}}
	}
	if err := n.conn.AddSet(set, elems); err != nil {
		return err
	}
	nr.VMapLookup.SetName, nr.VMapLookup.SetID = set.Name, set.ID
	return nil
}

// nftElemChunk is the most elements one message carries: a netlink
// attribute (the element list) holds at most 64 KiB, and the library does
// not split lists itself (nft does).
const nftElemChunk = 500

// inChunks calls f with elems in chunks of at most nftElemChunk, keeping
// an interval's start and end together.
func inChunks(elems []nftables.SetElement, f func([]nftables.SetElement) error) error {
	for len(elems) > 0 {
		n := min(nftElemChunk, len(elems))
		if n < len(elems) && elems[n].IntervalEnd {
			n++
		}
		if err := f(elems[:n]); err != nil {
			return err
		}
		elems = elems[n:]
	}
	return nil
}
