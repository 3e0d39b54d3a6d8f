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

// mergedIntervals turns networks into sorted, disjoint, non-adjacent
// intervals.
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
			next := prev.last.Next()
			if !next.IsValid() || iv.first.Compare(next) <= 0 {
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
