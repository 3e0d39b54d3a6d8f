package wiring

import (
	"fmt"
	"net"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Check compares the live pod network with what Setup makes for p and
// returns every difference (nil when it matches).
func Check(p Pod) []string {
	var diffs []string
	podNS, err := ns.GetNS(p.NetNSPath)
	if err != nil {
		return []string{fmt.Sprintf("pod netns %s: %v", p.NetNSPath, err)}
	}
	defer podNS.Close()
	podIndex := 0
	_ = podNS.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(p.ContainerIf)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("pod interface %s is missing", p.ContainerIf))
			return nil
		}
		podIndex = link.Attrs().Index
		addrs, _ := netlink.AddrList(link, netlink.FAMILY_ALL)
		for _, want := range p.Addrs {
			if !hasAddr(addrs, want) {
				diffs = append(diffs, fmt.Sprintf("pod interface %s lacks address %s", p.ContainerIf, want.String()))
			}
		}
		routes, _ := netlink.RouteList(link, netlink.FAMILY_ALL)
		for _, want := range podRoutes(link.Attrs().Index, p.Addrs) {
			if !hasRoute(routes, want) && !defaultViaOther(link.Attrs().Index, want) {
				diffs = append(diffs, fmt.Sprintf("pod route %s is missing", describe(want)))
			}
		}
		return nil
	})
	_ = p.HostNS.Do(func(ns.NetNS) error {
		link, err := netlink.LinkByName(p.HostIf)
		if err != nil {
			diffs = append(diffs, fmt.Sprintf("host interface %s is missing", p.HostIf))
			return nil
		}
		if alias := link.Attrs().Alias; p.Owner != "" && alias != "" && alias != OwnerMark(p.Owner) {
			diffs = append(diffs, fmt.Sprintf("host interface %s belongs to %s, not %s", p.HostIf, alias, p.Owner))
		}
		if _, veth := link.(*netlink.Veth); !veth || !peerIn(link, p.NetNSPath) || (podIndex != 0 && link.Attrs().ParentIndex != podIndex) {
			diffs = append(diffs, fmt.Sprintf("host interface %s is not the peer of the pod's %s", p.HostIf, p.ContainerIf))
		}
		if link.Attrs().HardwareAddr.String() != HostMAC {
			diffs = append(diffs, fmt.Sprintf("host interface %s has MAC %s, want %s", p.HostIf, link.Attrs().HardwareAddr, HostMAC))
		}
		routes, _ := netlink.RouteList(link, netlink.FAMILY_ALL)
		for _, want := range hostRoutes(link.Attrs().Index, p.Addrs) {
			if !hasRoute(routes, want) {
				diffs = append(diffs, fmt.Sprintf("node route %s is missing", describe(want)))
			}
		}
		return nil
	})
	return diffs
}

// Wired returns what Setup made for p if the live state is all there and
// the host end carries p.Owner's mark (nil otherwise), so a repeated ADD
// can answer without remaking anything.
func Wired(p Pod) *Result {
	if p.Owner == "" {
		return nil
	}
	if _, owned, err := Owned(p.HostNS, p.HostIf, p.Owner, ""); err != nil || !owned || len(Check(p)) > 0 {
		return nil
	}
	podNS, err := ns.GetNS(p.NetNSPath)
	if err != nil {
		return nil
	}
	defer podNS.Close()
	res := &Result{HostMAC: HostMAC, Sandbox: p.NetNSPath}
	_ = podNS.Do(func(ns.NetNS) error {
		if l, err := netlink.LinkByName(p.ContainerIf); err == nil {
			res.ContainerMAC = l.Attrs().HardwareAddr.String()
			res.DefaultV4, res.DefaultV6 = gateways(l.Attrs().Index, p.Addrs)
		}
		return nil
	})
	if res.ContainerMAC == "" {
		return nil
	}
	return res
}

func hasAddr(have []netlink.Addr, want net.IPNet) bool {
	for _, a := range have {
		if a.IPNet != nil && a.IPNet.IP.Equal(want.IP) {
			return true
		}
	}
	return false
}

func hasRoute(have []netlink.Route, want netlink.Route) bool {
	for _, r := range have {
		if r.Dst == nil || want.Dst == nil {
			continue
		}
		if r.Dst.String() == want.Dst.String() && r.Gw.Equal(want.Gw) {
			return true
		}
	}
	// The default route is listed with a nil Dst.
	if want.Dst != nil {
		if ones, _ := want.Dst.Mask.Size(); ones == 0 {
			for _, r := range have {
				if r.Dst == nil && r.Gw.Equal(want.Gw) {
					return true
				}
				if r.Dst != nil {
					if o, _ := r.Dst.Mask.Size(); o == 0 && r.Gw.Equal(want.Gw) {
						return true
					}
				}
			}
		}
	}
	return false
}

func describe(r netlink.Route) string {
	if r.Gw != nil {
		return fmt.Sprintf("%s via %s", r.Dst, r.Gw)
	}
	return r.Dst.String()
}
