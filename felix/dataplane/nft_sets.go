package dataplane

import (
	"fmt"
	"iter"
	"net/netip"
	"slices"

	"github.com/google/nftables"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// nftUnit is one element of an nftables set as felix writes it: an
// exact key (hash:ip,port sets), or an interval [start, end) of
// addresses (hash:net sets; end empty: up to the last address). Units
// are compared by their key, so a set's change is the units added and
// removed.
type nftUnit struct {
	start, end []byte
	interval   bool
}

// nftUnitKey identifies a unit without allocating: its start and end
// bytes (an ip,port key is at most 24 bytes: an IPv6 address, the
// protocol and the port in 4-byte registers).
type nftUnitKey struct {
	start  [24]byte
	end    [16]byte
	ns, ne uint8
}

func (u nftUnit) key() nftUnitKey {
	var k nftUnitKey
	k.ns = uint8(copy(k.start[:], u.start))
	k.ne = uint8(copy(k.end[:], u.end))
	return k
}

// nftUnitMap is a set's units by key.
type nftUnitMap = map[nftUnitKey]nftUnit

// elements are the kernel elements of u.
func (u nftUnit) elements() []nftables.SetElement {
	if !u.interval {
		return []nftables.SetElement{{Key: u.start}}
	}
	if u.end == nil {
		return []nftables.SetElement{{Key: u.start}}
	}
	return []nftables.SetElement{{Key: u.start}, {Key: u.end, IntervalEnd: true}}
}

// nftUnits are the elements of an interval (hash:net) set holding
// members, by key, and whether every member is a host address. Networks
// are merged into disjoint intervals first (ipset's hash:net holds
// overlapping networks; an nftables interval set does not), so a network
// inside another adds no element. (Sets of hosts only and ip,port sets
// are plain sets: their elements are their members, see plainChunks.)
func nftUnits(members calc.MemberList) (units nftUnitMap, hostsOnly bool, err error) {
	out := make(nftUnitMap, members.Len())
	ivs, hostsOnly, err := mergedIntervals(members)
	if err != nil {
		return nil, false, err
	}
	for _, iv := range ivs {
		u := nftUnit{start: iv.first.AsSlice(), interval: true}
		if next := iv.last.Next(); next.IsValid() {
			u.end = next.AsSlice()
		}
		out[u.key()] = u
	}
	return out, hostsOnly, nil
}

// addrInterval is an inclusive range of addresses.
type addrInterval struct{ first, last netip.Addr }

// mergedIntervals turns networks into sorted, disjoint intervals
// (overlapping networks merged; adjacent ones kept apart, so that a set
// of host addresses has one interval per member), and says whether every
// member is a host address.
func mergedIntervals(members calc.MemberList) (_ []addrInterval, hostsOnly bool, _ error) {
	ivs := make([]addrInterval, 0, members.Len())
	hostsOnly = true
	for m := range members.All() {
		p, err := parseMember(m)
		if err != nil {
			return nil, false, err
		}
		if p.IsSingleIP() {
			ivs = append(ivs, addrInterval{first: p.Addr(), last: p.Addr()})
			continue
		}
		hostsOnly = false
		ivs = append(ivs, addrInterval{first: p.Masked().Addr(), last: lastAddr(p)})
	}
	slices.SortFunc(ivs, func(a, b addrInterval) int { return a.first.Compare(b.first) })
	out := ivs[:0]
	for _, iv := range ivs {
		if n := len(out); n > 0 {
			prev := &out[n-1]
			if iv.first.Compare(prev.last) <= 0 {
				if iv.last.Compare(prev.last) > 0 {
					prev.last = iv.last
				}
				continue
			}
		}
		out = append(out, iv)
	}
	return out, hostsOnly, nil
}

func parseMember(m string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(m); err == nil {
		return p, nil
	}
	a, err := netip.ParseAddr(m)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("set member %q: not an address or network", m)
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// lastAddr is the last address of p.
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}

// unitDiff is what to delete and add to turn old into new.
func unitDiff(old, new nftUnitMap) (del, add []nftables.SetElement) {
	for k, u := range old {
		if _, ok := new[k]; !ok {
			del = append(del, u.elements()...)
		}
	}
	for k, u := range new {
		if _, ok := old[k]; !ok {
			add = append(add, u.elements()...)
		}
	}
	return del, add
}

// unitChunks calls f with the kernel elements of units in chunks of at
// most nftElemChunk (+1: an interval's end stays with its start), built
// in one buffer reused from chunk to chunk (f must not keep it).
func unitChunks(units nftUnitMap, f func([]nftables.SetElement) error) error {
	c := newChunker(len(units), f)
	for _, u := range units {
		if err := c.add(u.elements()...); err != nil {
			return err
		}
	}
	return c.flush()
}

// plainChunks is unitChunks for a plain set (see isPlainSet): one
// element per member, as elem makes it.
func plainChunks(members calc.MemberList, elem memberElement, f func([]nftables.SetElement) error) error {
	c := newChunker(members.Len(), f)
	for m := range members.All() {
		e, ok := elem(m)
		if !ok {
			return fmt.Errorf("set member %q does not fit the set", m)
		}
		if err := c.add(e); err != nil {
			return err
		}
	}
	return c.flush()
}

// chunker hands elements to f in chunks of at least nftElemChunk (the
// last one smaller) from one reused buffer; the elements of one add stay
// in one chunk.
type chunker struct {
	buf []nftables.SetElement
	f   func([]nftables.SetElement) error
}

func newChunker(n int, f func([]nftables.SetElement) error) *chunker {
	return &chunker{buf: make([]nftables.SetElement, 0, min(n, nftElemChunk)+1), f: f}
}

func (c *chunker) add(es ...nftables.SetElement) error {
	c.buf = append(c.buf, es...)
	if len(c.buf) < nftElemChunk {
		return nil
	}
	err := c.f(c.buf)
	c.buf = c.buf[:0]
	return err
}

func (c *chunker) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	return c.f(c.buf)
}

// memberElement is the element of member m in a plain set; ok is false
// for a member such a set cannot hold (a network in a host set) or a
// malformed one.
type memberElement func(m string) (nftables.SetElement, bool)

// plainElement is how a plain set of type typ holds a member.
func plainElement(typ calc.IPSetType) memberElement {
	if typ == calc.HashIPPort {
		return ipPortElement
	}
	return hostElement
}

// ipPortElement is the element of an ip,port member.
func ipPortElement(m string) (nftables.SetElement, bool) {
	k, err := rules.NftIPPortKey(m)
	return nftables.SetElement{Key: k}, err == nil
}

// hostElement is the element of host address member m of a host set;
// ok is false for a network or a malformed member.
func hostElement(m string) (nftables.SetElement, bool) {
	p, err := parseMember(m)
	if err != nil || !p.IsSingleIP() {
		return nftables.SetElement{}, false
	}
	return nftables.SetElement{Key: p.Addr().AsSlice()}, true
}

// allHosts says whether every member is a host address.
func allHosts(members calc.MemberList) bool {
	for m := range members.All() {
		if _, ok := hostElement(m); !ok {
			return false
		}
	}
	return true
}

// plainSetChange is what to delete from and add to a plain set holding
// old to make it hold new: from the renderer's change ch when exact (ch
// is since old's version; each removed member is in old) and otherwise by
// comparing the two sorted lists. ok is false when new holds a member the
// set cannot (a network in a host set: it must become an interval set).
func plainSetChange(old, new calc.MemberList, elem memberElement, ch rules.IPSetChange, exact bool) (del, add []nftables.SetElement, ok bool) {
	if exact && plainPatch(old, elem, ch, &del, &add) {
		return del, add, true
	}
	del, add = nil, nil
	for m, inOld := range sortedDiff(old, new) {
		e, fits := elem(m)
		switch {
		case inOld && fits:
			del = append(del, e)
		case !inOld && !fits:
			return nil, nil, false
		case !inOld:
			add = append(add, e)
		}
	}
	return del, add, true
}

// plainPatch turns an exact change into elements; false when the change
// does not fit old (a removed member old lacks) or the set (a network).
func plainPatch(old calc.MemberList, elem memberElement, ch rules.IPSetChange, del, add *[]nftables.SetElement) bool {
	for _, m := range ch.Removed {
		e, ok := elem(m)
		if !ok || !old.Has(m) {
			return false
		}
		*del = append(*del, e)
	}
	for _, m := range ch.Added {
		e, ok := elem(m)
		if !ok {
			return false
		}
		if !old.Has(m) {
			*add = append(*add, e)
		}
	}
	return true
}

// sortedDiff yields the members in exactly one of old and new (both
// sorted), with true for those only in old.
func sortedDiff(old, new calc.MemberList) iter.Seq2[string, bool] {
	return func(yield func(string, bool) bool) {
		nextOld, stopOld := iter.Pull(old.All())
		defer stopOld()
		nextNew, stopNew := iter.Pull(new.All())
		defer stopNew()
		o, okO := nextOld()
		n, okN := nextNew()
		for okO || okN {
			switch {
			case okO && (!okN || o < n):
				if !yield(o, true) {
					return
				}
				o, okO = nextOld()
			case okN && (!okO || n < o):
				if !yield(n, false) {
					return
				}
				n, okN = nextNew()
			default:
				o, okO = nextOld()
				n, okN = nextNew()
			}
		}
	}
}

// hostUnit is the unit of a host address member ("10.0.0.1" or
// "10.0.0.1/32"); ok is false for a network.
func hostUnit(m string) (nftUnit, bool) {
	p, err := parseMember(m)
	if err != nil || !p.IsSingleIP() {
		return nftUnit{}, false
	}
	a := p.Addr()
	u := nftUnit{start: a.AsSlice(), interval: true}
	if next := a.Next(); next.IsValid() {
		u.end = next.AsSlice()
	}
	return u, true
}

// patchUnits applies a renderer's member change to an interval set's
// units in place when that is exact: host addresses added to and removed
// from a set of host addresses only (whose units are its members one to
// one, so nothing overlaps). It returns the elements to
// delete and add, and ok false (units untouched) when the change must be
// computed from the whole member list instead.
func patchUnits(hostsOnly bool, units nftUnitMap, ch rules.IPSetChange) (del, add []nftables.SetElement, ok bool) {
	unit := func(m string) (nftUnit, bool) {
		if !hostsOnly {
			return nftUnit{}, false
		}
		return hostUnit(m)
	}
	rm := make([]nftUnit, 0, len(ch.Removed))
	ad := make([]nftUnit, 0, len(ch.Added))
	for _, m := range ch.Removed {
		u, ok := unit(m)
		if _, have := units[u.key()]; !ok || !have {
			return nil, nil, false
		}
		rm = append(rm, u)
	}
	for _, m := range ch.Added {
		u, ok := unit(m)
		if !ok {
			return nil, nil, false
		}
		ad = append(ad, u)
	}
	for _, u := range rm {
		delete(units, u.key())
		del = append(del, u.elements()...)
	}
	for _, u := range ad {
		if _, have := units[u.key()]; !have {
			units[u.key()] = u
			add = append(add, u.elements()...)
		}
	}
	return del, add, true
}
