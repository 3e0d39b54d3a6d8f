package dataplane

import (
	"fmt"
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

func (u nftUnit) key() string { return string(u.start) + "|" + string(u.end) }

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

// nftUnits are the elements of a set of type typ holding members, by
// key. Networks are merged into disjoint intervals first (ipset's
// hash:net holds overlapping networks; an nftables interval set does
// not), so a network inside another adds no element.
func nftUnits(typ calc.IPSetType, members calc.MemberList) (map[string]nftUnit, error) {
	out := make(map[string]nftUnit, members.Len())
	if typ == calc.HashIPPort {
		for m := range members.All() {
			k, err := rules.NftIPPortKey(m)
			if err != nil {
				return nil, err
			}
			u := nftUnit{start: k}
			out[u.key()] = u
		}
		return out, nil
	}
	ivs, err := mergedIntervals(members)
	if err != nil {
		return nil, err
	}
	for _, iv := range ivs {
		u := nftUnit{start: iv.first.AsSlice(), interval: true}
		if next := iv.last.Next(); next.IsValid() {
			u.end = next.AsSlice()
		}
		out[u.key()] = u
	}
	return out, nil
}

// addrInterval is an inclusive range of addresses.
type addrInterval struct{ first, last netip.Addr }

// mergedIntervals turns networks into sorted, disjoint intervals
// (overlapping networks merged; adjacent ones kept apart, so that a set
// of host addresses has one interval per member).
func mergedIntervals(members calc.MemberList) ([]addrInterval, error) {
	ivs := make([]addrInterval, 0, members.Len())
	for m := range members.All() {
		p, err := parseMember(m)
		if err != nil {
			return nil, err
		}
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
	return out, nil
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
func unitDiff(old, new map[string]nftUnit) (del, add []nftables.SetElement) {
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

// allElements are the kernel elements of every unit.
func allElements(units map[string]nftUnit) []nftables.SetElement {
	out := make([]nftables.SetElement, 0, 2*len(units))
	for _, u := range units {
		out = append(out, u.elements()...)
	}
	return out
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

// allHosts says whether every member is a host address.
func allHosts(typ calc.IPSetType, members calc.MemberList) bool {
	if typ != calc.HashNet {
		return false
	}
	for m := range members.All() {
		if _, ok := hostUnit(m); !ok {
			return false
		}
	}
	return true
}

// patchUnits applies a renderer's member change to units in place when
// that is exact: members of a hash:ip,port set, or host addresses added
// to and removed from a set of host addresses only (whose units are its
// members one to one, so nothing overlaps). It returns the elements to
// delete and add, and ok false (units untouched) when the change must be
// computed from the whole member list instead.
func patchUnits(typ calc.IPSetType, hostsOnly bool, units map[string]nftUnit, ch rules.IPSetChange) (del, add []nftables.SetElement, ok bool) {
	unit := func(m string) (nftUnit, bool) {
		if typ == calc.HashIPPort {
			k, err := rules.NftIPPortKey(m)
			return nftUnit{start: k}, err == nil
		}
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
