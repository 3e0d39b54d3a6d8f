package wireguard

import (
	"errors"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// syncTableAndRule makes c.Table hold exactly want (ViaDevice routes on
// the link with index dev) and the rule `not fwmark M/M lookup T` exist
// at c.RulePriority while want has routes; with none, the rule goes.
// The table is Calico's WireGuard table: everything in it is ours.
func (dr *Driver) syncTableAndRule(want []Route, c Config, dev int) error {
	fam := family(c.V6)
	kernel, err := dr.h.RouteListFiltered(fam, &netlink.Route{Table: c.Table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("listing routing table %d: %w", c.Table, err)
	}
	have := make([]Route, 0, len(kernel))
	byDst := map[netip.Prefix]netlink.Route{}
	for _, r := range kernel {
		p, ok := prefixOf(*dstOf(r, c.V6))
		if !ok {
			continue
		}
		byDst[p] = r
		have = append(have, Route{Dst: p, Kind: kindOf(r, dev)})
	}
	add, del := PlanRoutes(want, have)
	var errs []error
	for _, r := range del {
		kr := byDst[r.Dst]
		if err := dr.h.RouteDel(&kr); err != nil && !errors.Is(err, unix.ESRCH) {
			errs = append(errs, fmt.Errorf("removing %s from table %d: %w", r.Dst, c.Table, err))
		}
	}
	for _, r := range add {
		if err := dr.h.RouteReplace(tableRoute(r, c.Table, dev)); err != nil {
			errs = append(errs, fmt.Errorf("adding %s (%v) to table %d: %w", r.Dst, r.Kind, c.Table, err))
		}
	}
	if len(add)+len(del) > 0 {
		dr.log.Info("WireGuard routing table programmed", "table", c.Table, "added", len(add), "removed", len(del))
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return dr.syncRule(c, len(want) > 0)
}

// syncRule adds or removes the WireGuard rule; other rules at its
// priority into its table (an older mark) are removed.
func (dr *Driver) syncRule(c Config, wanted bool) error {
	rules, err := dr.h.RuleList(family(c.V6))
	if err != nil {
		return fmt.Errorf("listing routing rules: %w", err)
	}
	mark := uint32(c.FirewallMark)
	found := false
	for _, r := range rules {
		if r.Table != c.Table {
			continue
		}
		if wanted && r.Priority == c.RulePriority && r.Invert && r.Mark == mark && r.Mask != nil && *r.Mask == mark {
			found = true
			continue
		}
		if err := dr.h.RuleDel(&r); err != nil {
			return fmt.Errorf("removing routing rule %v: %w", r, err)
		}
	}
	if !wanted || found {
		return nil
	}
	r := netlink.NewRule()
	r.Family, r.Priority, r.Table, r.Invert, r.Mark, r.Mask = family(c.V6), c.RulePriority, c.Table, true, mark, &mark
	if err := dr.h.RuleAdd(r); err != nil {
		return fmt.Errorf("adding routing rule %v: %w", r, err)
	}
	dr.log.Info("WireGuard routing rule added", "priority", c.RulePriority, "table", c.Table, "notFwmark", fmt.Sprintf("%#x", mark))
	return nil
}

func family(v6 bool) int {
	if v6 {
		return unix.AF_INET6
	}
	return unix.AF_INET
}

func dstOf(r netlink.Route, v6 bool) *net.IPNet {
	if r.Dst != nil {
		return r.Dst
	}
	if v6 {
		return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
	}
	return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
}

func kindOf(r netlink.Route, dev int) RouteKind {
	switch {
	case r.Type == unix.RTN_THROW:
		return Throw
	case r.Type == unix.RTN_BLACKHOLE || r.Type == unix.RTN_UNREACHABLE || r.Type == unix.RTN_PROHIBIT:
		return Blackhole
	case dev != 0 && r.LinkIndex == dev:
		return ViaDevice
	}
	return RouteKind(255) // not one we would write: replaced
}

func tableRoute(r Route, table, dev int) *netlink.Route {
	dst := ipNets([]netip.Prefix{r.Dst})[0]
	nr := &netlink.Route{Dst: &dst, Table: table, Protocol: unix.RTPROT_BOOT}
	switch r.Kind {
	case Throw:
		nr.Type = unix.RTN_THROW
	case Blackhole:
		nr.Type = unix.RTN_BLACKHOLE
	default:
		nr.LinkIndex, nr.Scope = dev, netlink.SCOPE_LINK
	}
	return nr
}
