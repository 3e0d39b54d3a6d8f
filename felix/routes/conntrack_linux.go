package routes

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// syncConntrack forgets the connections of a workload address that moved
// to another interface (another pod) or went: its old flows must not
// carry on into whichever pod gets the address next (as Calico's route
// table cleans conntrack when a workload route moves). The first call
// only learns the current state.
func (dr *Driver) syncConntrack(d Desired) error {
	now := map[netip.Addr]string{}
	for _, r := range d.Routes {
		if r.Workload && r.Dst.IsSingleIP() {
			now[r.Dst.Addr()] = r.Dev
		}
	}
	if dr.workloadDevs == nil {
		dr.workloadDevs = now
		return nil
	}
	var errs []error
	for ip, dev := range dr.workloadDevs {
		if cur, ok := now[ip]; ok && cur == dev {
			continue
		}
		if err := dr.deleteConntrack(ip); err != nil {
			errs = append(errs, err)
			now[ip] = dev + " (flows not yet removed)" // retried on the next Apply
			continue
		}
		dr.log.Info("removed conntrack entries of a workload address that moved or went", "ip", ip, "from", dev, "to", now[ip])
	}
	dr.workloadDevs = now
	if len(errs) > 0 {
		return fmt.Errorf("cleaning conntrack: %v", errs)
	}
	return nil
}

// deleteConntrack removes every flow with ip as a source or destination,
// in either direction.
func (dr *Driver) deleteConntrack(ip netip.Addr) error {
	family := netlink.InetFamily(unix.AF_INET)
	if ip.Is6() {
		family = netlink.InetFamily(unix.AF_INET6)
	}
	var filters []netlink.CustomConntrackFilter
	for _, tp := range []netlink.ConntrackFilterType{netlink.ConntrackOrigSrcIP, netlink.ConntrackOrigDstIP, netlink.ConntrackReplySrcIP, netlink.ConntrackReplyDstIP} {
		f := &netlink.ConntrackFilter{}
		if err := f.AddIP(tp, net.IP(ip.AsSlice())); err != nil {
			return err
		}
		filters = append(filters, f)
	}
	if _, err := dr.h.ConntrackDeleteFilters(netlink.ConntrackTable, family, filters...); err != nil {
		return fmt.Errorf("deleting conntrack entries of %s: %w", ip, err)
	}
	return nil
}
