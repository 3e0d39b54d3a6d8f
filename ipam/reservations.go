package ipam

import (
	"net/netip"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Reservations is the set of prefixes IPReservations exclude from
// allocation. The zero value reserves nothing.
type Reservations []netip.Prefix

// ParseReservations collects the CIDRs and single addresses of
// reservations; entries that do not parse are skipped (the API validates
// them on write).
func ParseReservations(rs []v3.IPReservation) Reservations {
	var out Reservations
	for _, r := range rs {
		for _, c := range r.Spec.ReservedCIDRs {
			if p, ok := parseIPOrCIDR(c); ok {
				out = append(out, p)
			}
		}
	}
	return out
}

func parseIPOrCIDR(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return p, false
		}
		return p.Masked(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// Contains says whether ip is reserved.
func (r Reservations) Contains(ip netip.Addr) bool {
	for _, p := range r {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}
