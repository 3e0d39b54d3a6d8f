package calc

import (
	"maps"
	"runtime"
	"slices"
	"strconv"
	"sync"

	"github.com/google/btree"
	"github.com/tabbynet/tabby/api/selector"
)

// labelIndex is the Engine's selector x labelled-item index and the ipset
// membership kept from it. Items are endpoints and network sets with
// their effective labels (profile labels already inherited); selectors
// are the matchers of the wanted ipsets. When an item comes, goes or
// changes labels, it is evaluated against the selectors that can match
// it (those of its namespace and the global ones) and each "now matches"
// / "no longer matches" changes the members of the sets using that
// selector. When a selector is first wanted it is evaluated once over the
// items of its namespace scope (all items for a global one).
//
// A set keeps its members in a B-tree (with a count for a member two
// items give) and the members added or removed since it was last
// published; publish hands out a copy-on-write clone of the tree, so that
// it costs what changed, not the set's size.
type labelIndex struct {
	items map[objKey]*item
	// byNS holds the items by the value of their namespace label ("" for
	// none).
	byNS map[string]map[objKey]*item
	sels map[string]*selState
	// selsByNS holds the selectors by the namespace they are limited to
	// ("" for global ones).
	selsByNS map[string]map[string]*selState
	// bucketVersion changes whenever a bucket of selsByNS does (a
	// selector added or removed): remembered matches of an older version
	// are stale.
	bucketVersion map[string]uint64
	nextVersion   uint64
	sets          map[string]*setState
	dirty         map[string]*setState
	// live is the published ipsets by ID (replaced entries, never
	// modified ones).
	live  map[string]*IPSet
	delta *deltaBuilder
	svc   serviceIndex
}

type item struct {
	key objKey
	m   *labelled
	ns  string
	// sels are the selectors matching the item (a few: a slice is much
	// smaller than a map, and this is per endpoint of the cluster).
	sels []*selState
}

type selState struct {
	m       *matcher
	sets    map[string]*setState
	matched map[*item]struct{}
}

type setState struct {
	d    *demand
	refs int
	sel  *selState
	// members holds the set's members (copy-on-write: each published
	// version is a clone); extra counts the further givers of a member
	// given by more than one item (rare: most members have one).
	members *btree.BTreeG[string]
	extra   map[string]int32
	// pending: +1 for a member added, -1 for one removed since pub.
	pending map[string]int8
	pub     *IPSet // last published (nil: never)
	// bulk are members given to a set never published, in the order the
	// givers came and with repeats; they go into members (sorted) when
	// the set is first published or a member leaves: a whole set inserted
	// in order costs a fraction of inserting it in the givers' order.
	bulk []string
}

func (x *labelIndex) init(d *deltaBuilder) {
	x.items = map[objKey]*item{}
	x.byNS = map[string]map[objKey]*item{}
	x.sels = map[string]*selState{}
	x.selsByNS = map[string]map[string]*selState{}
	x.bucketVersion = map[string]uint64{}
	x.sets = map[string]*setState{}
	x.dirty = map[string]*setState{}
	x.live = map[string]*IPSet{}
	x.delta = d
	x.svc.init()
}

func namespaceOf(m *labelled) string { return m.labels[selector.NamespaceLabel] }

// setItem replaces the item of key k by m (nil: removed).
func (x *labelIndex) setItem(k objKey, m *labelled) {
	old := x.items[k]
	if old != nil && m != nil && old.ns == namespaceOf(m) && maps.Equal(old.m.labels, m.labels) {
		// Same matches; the members it gives may differ.
		if !sameMembers(old.m, m) {
			for _, s := range old.sels {
				for _, set := range s.sets {
					set.change(old.m, -1)
					set.change(m, +1)
					x.touch(set)
				}
			}
		}
		old.m = m
		return
	}
	if old != nil {
		for _, s := range old.sels {
			delete(s.matched, old)
			for _, set := range s.sets {
				set.change(old.m, -1)
				x.touch(set)
			}
		}
		delete(x.items, k)
		if b := x.byNS[old.ns]; b != nil {
			delete(b, k)
			if len(b) == 0 {
				delete(x.byNS, old.ns)
			}
		}
	}
	if m == nil {
		return
	}
	it := &item{key: k, m: m, ns: namespaceOf(m)}
	x.items[k] = it
	b := x.byNS[it.ns]
	if b == nil {
		b = map[objKey]*item{}
		x.byNS[it.ns] = b
	}
	b[k] = it
	x.evalItem(it, "")
	if it.ns != "" {
		x.evalItem(it, it.ns)
	}
}

// evalItem adds it to the selectors of bucket (a namespace, or "" for
// the global ones) that match it.
func (x *labelIndex) evalItem(it *item, bucket string) {
	sels := x.selsByNS[bucket]
	if len(sels) == 0 {
		return
	}
	var matching []*selState
	sh := it.m.shared
	if bm, ok := sh.lookup(bucket, x.bucketVersion[bucket]); ok {
		matching = bm
	} else {
		for _, s := range sels {
			if s.m.matches(it.m.labels) {
				matching = append(matching, s)
			}
		}
		sh.remember(bucket, x.bucketVersion[bucket], matching)
	}
	for _, s := range matching {
		it.sels = append(it.sels, s)
		s.matched[it] = struct{}{}
		for _, set := range s.sets {
			set.change(it.m, +1)
			x.touch(set)
		}
	}
}

// bucketChanged makes the remembered matches of bucket stale.
func (x *labelIndex) bucketChanged(bucket string) {
	x.nextVersion++
	x.bucketVersion[bucket] = x.nextVersion
}

// lookup returns the remembered selectors of bucket matching sh's labels
// at version (sh may be nil: nothing remembered).
func (sh *sharedLabels) lookup(bucket string, version uint64) ([]*selState, bool) {
	if sh == nil {
		return nil, false
	}
	bm, ok := sh.matches[bucket]
	return bm.sels, ok && bm.version == version
}

func (sh *sharedLabels) remember(bucket string, version uint64, sels []*selState) {
	if sh == nil {
		return
	}
	if sh.matches == nil {
		sh.matches = map[string]bucketMatches{}
	}
	sh.matches[bucket] = bucketMatches{version: version, sels: sels}
}

func sameMembers(a, b *labelled) bool {
	return slices.Equal(a.netStrs, b.netStrs) && slices.Equal(a.ports, b.ports)
}

func (x *labelIndex) touch(set *setState) { x.dirty[set.d.id] = set }

// ref wants the set d (counted: each owner refs it once).
func (x *labelIndex) ref(d *demand) {
	if set := x.sets[d.id]; set != nil {
		set.refs++
		return
	}
	set := &setState{d: d, refs: 1, members: memberTree(), pending: map[string]int8{}}
	x.sets[d.id] = set
	x.touch(set)
	if d.service != "" {
		x.svc.want(set)
		return
	}
	if d.sel == nil {
		for _, n := range d.nets {
			set.count(n.String(), +1)
		}
		return
	}
	s := x.sels[d.sel.id]
	if s == nil {
		s = x.addSelector(d.sel)
	}
	s.sets[d.id] = set
	set.sel = s
	for it := range s.matched {
		set.change(it.m, +1)
	}
}

// deref drops one owner's want of the set id.
func (x *labelIndex) deref(id string) {
	set := x.sets[id]
	set.refs--
	if set.refs > 0 {
		return
	}
	delete(x.sets, id)
	x.dirty[id] = set
	if set.d.service != "" {
		x.svc.unwant(set)
	}
	if s := set.sel; s != nil {
		delete(s.sets, id)
		if len(s.sets) == 0 {
			x.removeSelector(s)
		}
	}
}

// addSelector evaluates m over the items of its scope.
func (x *labelIndex) addSelector(m *matcher) *selState {
	s := &selState{m: m, sets: map[string]*setState{}, matched: map[*item]struct{}{}}
	x.sels[m.id] = s
	byID := x.selsByNS[m.namespace]
	if byID == nil {
		byID = map[string]*selState{}
		x.selsByNS[m.namespace] = byID
	}
	byID[m.id] = s
	x.bucketChanged(m.namespace)
	scope := x.items
	if m.namespace != "" {
		scope = x.byNS[m.namespace]
	}
	for _, it := range scope {
		if m.matches(it.m.labels) {
			s.matched[it] = struct{}{}
			it.sels = append(it.sels, s)
		}
	}
	return s
}

func (x *labelIndex) removeSelector(s *selState) {
	for it := range s.matched {
		i := slices.Index(it.sels, s)
		it.sels = slices.Delete(it.sels, i, i+1)
	}
	delete(x.sels, s.m.id)
	x.bucketChanged(s.m.namespace)
	if byID := x.selsByNS[s.m.namespace]; byID != nil {
		delete(byID, s.m.id)
		if len(byID) == 0 {
			delete(x.selsByNS, s.m.namespace)
		}
	}
}

// change adds (by +1) or removes (by -1) the members item m gives.
func (set *setState) change(m *labelled, by int32) {
	var buf [4]string
	for _, s := range appendMembers(buf[:0], set.d, m) {
		set.count(s, by)
	}
}

// count counts one giver more (by +1) or less (by -1) of member s.
func (set *setState) count(s string, by int32) {
	if set.pub == nil && by > 0 {
		set.bulk = append(set.bulk, s)
		return
	}
	set.flushBulk()
	entered, left := false, false
	if by > 0 {
		if _, had := set.members.ReplaceOrInsert(s); had {
			if set.extra == nil {
				set.extra = map[string]int32{}
			}
			set.extra[s]++
		} else {
			entered = true
		}
	} else if n := set.extra[s]; n > 0 {
		if n == 1 {
			delete(set.extra, s)
		} else {
			set.extra[s] = n - 1
		}
	} else {
		_, left = set.members.Delete(s)
	}
	// A set not yet published is built from members: no pending.
	if set.pub != nil && (entered || left) {
		p := set.pending[s] + int8(by)
		if p == 0 {
			delete(set.pending, s)
		} else {
			set.pending[s] = p
		}
	}
}

// parallelBulk is the number of bulk members from which flushBulks
// shares the sets out among the CPUs (a first computation at 150,000
// endpoints sorts and inserts ~300,000).
const parallelBulk = 20_000

// flushBulks flushes the bulk of sets: each set is independent of the
// others, so large bulks are flushed on every CPU.
func flushBulks(sets map[string]*setState) {
	var big []*setState
	n := 0
	for _, set := range sets {
		if len(set.bulk) > 0 {
			big = append(big, set)
			n += len(set.bulk)
		}
	}
	if n < parallelBulk {
		return // publish flushes them one by one
	}
	work := make(chan *setState, len(big))
	for _, set := range big {
		work <- set
	}
	close(work)
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(big)) {
		wg.Go(func() {
			for set := range work {
				set.flushBulk()
			}
		})
	}
	wg.Wait()
}

// flushBulk moves the bulk members into members, in order.
func (set *setState) flushBulk() {
	if len(set.bulk) == 0 {
		return
	}
	slices.Sort(set.bulk)
	for _, s := range set.bulk {
		if _, had := set.members.ReplaceOrInsert(s); had {
			if set.extra == nil {
				set.extra = map[string]int32{}
			}
			set.extra[s]++
		}
	}
	set.bulk = nil
}

// appendMembers appends the members labelled object m gives to set d
// when d's selector matches it: its addresses for a hash:net set, its
// address,protocol:port for a named-port set (when it has that port).
func appendMembers(dst []string, d *demand, m *labelled) []string {
	if d.typ == HashNet {
		return append(dst, m.netStrs...)
	}
	for _, p := range m.ports {
		// A set of no protocol (a rule without one, as a
		// ClusterNetworkPolicy's named port) holds the port of that name
		// of every protocol, as Calico's ProtocolAny.
		if p.name != d.portName || p.port == 0 || d.proto != 0 && p.proto != d.proto || !portProto(p.proto) {
			continue
		}
		dst = appendIPPorts(dst, m, p.proto, p.port)
		if d.proto != 0 {
			break
		}
	}
	return dst
}

// appendIPPorts appends "ip,proto:port" for each of m's single addresses.
func appendIPPorts(dst []string, m *labelled, proto uint8, port uint16) []string {
	name := protoName(proto)
	var buf []byte
	for _, n := range m.nets {
		if n.IsSingleIP() {
			buf = n.Addr().AppendTo(buf[:0])
			buf = append(append(append(buf, ','), name...), ':')
			dst = append(dst, string(strconv.AppendUint(buf, uint64(port), 10)))
		}
	}
	return dst
}

// publish turns the pending changes of the touched sets into new
// published sets.
func (x *labelIndex) publish() {
	if len(x.dirty) == 0 {
		return
	}
	x.delta.ipsetsMap = true
	flushBulks(x.dirty)
	for id, set := range x.dirty {
		x.delta.sets[id] = true
		if x.sets[id] != set { // no longer wanted (a set wanted again is touched again)
			delete(x.live, id)
			continue
		}
		if set.pub != nil && len(set.pending) == 0 {
			x.live[id] = set.pub
			continue
		}
		if set.pub != nil {
			adds, removes := set.pendingChanges()
			x.delta.members[id] = IPSetDelta{ID: id, Added: adds, Removed: removes}
		}
		set.flushBulk()
		set.pub = &IPSet{ID: id, Type: set.d.typ, Members: snapshot(set.members)}
		if len(set.pending) > 0 {
			set.pending = map[string]int8{} // clear would keep a large table to walk
		}
		x.live[id] = set.pub
	}
	clear(x.dirty)
}

// pendingChanges returns the members added and removed since the set was
// last published, each sorted.
func (set *setState) pendingChanges() (adds, removes []string) {
	for m, p := range set.pending {
		if p > 0 {
			adds = append(adds, m)
		} else {
			removes = append(removes, m)
		}
	}
	slices.Sort(adds)
	slices.Sort(removes)
	return adds, removes
}
