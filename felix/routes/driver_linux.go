package routes

import (
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/tabbynet/tabby/felix/wireguard"
)

// Driver reconciles a Desired state with the kernel of one network
// namespace through a netlink handle bound to it. It is not safe for
// concurrent use (the Manager calls it from one goroutine).
type Driver struct {
	h   *netlink.Handle
	log *slog.Logger
	// knownPools are the pool CIDRs seen since start: a route via a
	// gateway into one of them is ours even after its pool went.
	knownPools map[netip.Prefix]bool
	// WorkloadPrefixes name the CNI's interfaces, whose routes are never
	// touched [default cali].
	WorkloadPrefixes []string
	// Sysctl, when set, writes a sysctl (e.g. "net/ipv4/ip_forward") in
	// the namespace; every Apply makes sure forwarding is on, as felix
	// does at start (routing pods is the node's job).
	Sysctl func(key, value string) error
	// ReadSysctl, when set, reads a sysctl of the namespace (the default
	// rp_filter the workload interfaces get, as Calico's felix).
	ReadSysctl func(key string) (string, error)
	// sysctlDone are the workload interfaces configured (ifsysctl_linux.go).
	sysctlDone map[string]ipFamilies
	// MTUFile, when set, receives the pods' MTU (PodMTU over the
	// interfaces matching MTUIfacePattern, default Calico's), as Calico
	// writes /var/lib/calico/mtu for its CNI plugin.
	MTUFile         string
	MTUIfacePattern *regexp.Regexp
	lastMTU         int
	// IPIPMTU, VXLANMTU and VXLANMTUV6 are the tunnel devices' MTUs
	// (Calico's IpInIpMtu, VXLANMTU, VXLANMTUV6); 0 derives them from the
	// parent interface (VXLAN) or leaves the kernel's (tunl0). When set
	// they are also the pods' MTU in MTUFile.
	IPIPMTU, VXLANMTU, VXLANMTUV6 int
	// WorkloadRouteGrace is how long a route on a workload interface
	// that no local WorkloadEndpoint explains is left alone before it is
	// removed (the CNI writes the route before felix hears of the
	// endpoint) [default 30s]. Now is the clock [default time.Now].
	WorkloadRouteGrace time.Duration
	Now                func() time.Time
	unknownSince       map[routeKey]time.Time
	// workloadDevs is the interface of each local workload address at
	// the last Apply (for conntrack cleanup).
	workloadDevs map[netip.Addr]string
	// Wireguard are the WireGuard drivers per IP version (IPv4, IPv6);
	// nil leaves that version's WireGuard state alone.
	Wireguard [2]*wireguard.Driver
	// OnWireguardKey, when set, is told each WireGuard device's public
	// key (the zero key: none) after every Apply (to publish it).
	OnWireguardKey func(v6 bool, key wgtypes.Key)
}

// NewDriver returns a driver over h (see netlink.NewHandleAt).
func NewDriver(h *netlink.Handle, log *slog.Logger) *Driver {
	if log == nil {
		log = slog.Default()
	}
	return &Driver{h: h, log: log, knownPools: map[netip.Prefix]bool{}, WorkloadPrefixes: []string{"cali"},
		WorkloadRouteGrace: 30 * time.Second, Now: time.Now, unknownSince: map[routeKey]time.Time{}}
}

// Stats count what one Apply changed.
type Stats struct {
	RoutesAdded, RoutesRemoved, NeighborsChanged, DevicesChanged int
}

// Apply makes the kernel match d: devices first (routes need them), then
// neighbours and FDB entries, then routes. It returns the first error
// after trying everything it could.
func (dr *Driver) Apply(d Desired) (Stats, error) {
	var st Stats
	var errs []error
	for _, p := range d.Pools {
		dr.knownPools[p] = true
	}
	if dr.Sysctl != nil {
		if err := dr.Sysctl("net/ipv4/ip_forward", "1"); err != nil {
			errs = append(errs, fmt.Errorf("enabling IPv4 forwarding: %w", err))
		}
	}
	if d.VXLANv6 != nil && dr.Sysctl != nil {
		if err := dr.Sysctl("net/ipv6/conf/all/forwarding", "1"); err != nil {
			errs = append(errs, fmt.Errorf("enabling IPv6 forwarding: %w", err))
		}
	}
	for _, v6 := range []bool{false, true} {
		vtep := d.VXLAN
		if v6 {
			vtep = d.VXLANv6
		}
		if err := dr.syncVXLAN(vxlanDev(v6), v6, vtep, &st); err != nil {
			errs = append(errs, err)
		} else if vtep != nil {
			if err := dr.syncNeighbors(vxlanDev(v6), v6, d, &st); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err := dr.syncIPIP(d.IPIP, &st); err != nil {
		errs = append(errs, err)
	}
	for _, v6 := range []bool{false, true} {
		if err := dr.syncRoutes(v6, d.Routes, &st); err != nil {
			errs = append(errs, err)
		}
	}
	if err := dr.syncInterfaceSysctls(d); err != nil {
		errs = append(errs, err)
	}
	mtus, err := dr.linkMTUs()
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, dr.syncWireguard(d, mtus))
	if err := dr.syncMTUFile(d, mtus); err != nil {
		errs = append(errs, err)
	}
	if err := dr.syncConntrack(d); err != nil {
		errs = append(errs, err)
	}
	return st, errors.Join(errs...)
}

// syncVXLAN creates, reconfigures or removes a VXLAN device
// (vxlan.calico, or vxlan-v6.calico when v6).
func (dr *Driver) syncVXLAN(dev string, v6 bool, v *VTEP, st *Stats) error {
	cur, err := dr.h.LinkByName(dev)
	var notFound netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("reading %s: %w", dev, err)
	}
	if v == nil {
		if cur == nil {
			return nil
		}
		st.DevicesChanged++
		dr.log.Info("removing a VXLAN device: no pool uses it", "device", dev)
		if err := dr.h.LinkDel(cur); err != nil {
			return fmt.Errorf("removing %s: %w", dev, err)
		}
		return nil
	}
	overhead := VXLANOverhead
	if v6 {
		overhead = VXLANOverheadV6
	}
	parent, mtu, err := dr.interfaceOf(v.Parent)
	if err != nil {
		return err
	}
	devMTU := mtu - overhead
	if conf := map[bool]int{false: dr.VXLANMTU, true: dr.VXLANMTUV6}[v6]; conf > 0 {
		devMTU = conf
	}
	want := &netlink.Vxlan{
		LinkAttrs: netlink.LinkAttrs{Name: dev, HardwareAddr: v.MAC, MTU: devMTU},
		VxlanId:   VXLANVNI, Port: VXLANPort, SrcAddr: v.Parent.AsSlice(), VtepDevIndex: parent.Attrs().Index,
	}
	if cur != nil {
		if have, ok := cur.(*netlink.Vxlan); !ok || have.VxlanId != VXLANVNI || have.Port != VXLANPort ||
			!have.SrcAddr.Equal(want.SrcAddr) || have.VtepDevIndex != want.VtepDevIndex {
			dr.log.Info("recreating a VXLAN device: its parameters changed", "device", dev)
			if err := dr.h.LinkDel(cur); err != nil {
				return fmt.Errorf("removing misconfigured %s: %w", dev, err)
			}
			cur = nil
		}
	}
	if cur == nil {
		st.DevicesChanged++
		if err := dr.h.LinkAdd(want); err != nil {
			return fmt.Errorf("creating %s: %w", dev, err)
		}
		if cur, err = dr.h.LinkByName(dev); err != nil {
			return fmt.Errorf("reading the new %s: %w", dev, err)
		}
	}
	if cur.Attrs().HardwareAddr.String() != v.MAC.String() {
		st.DevicesChanged++
		if err := dr.h.LinkSetHardwareAddr(cur, v.MAC); err != nil {
			return fmt.Errorf("setting %s's MAC: %w", dev, err)
		}
	}
	if cur.Attrs().MTU != want.MTU {
		if err := dr.h.LinkSetMTU(cur, want.MTU); err != nil {
			return fmt.Errorf("setting %s's MTU: %w", dev, err)
		}
	}
	if err := dr.syncAddr(cur, v.Addr, st); err != nil {
		return err
	}
	if cur.Attrs().Flags&net.FlagUp == 0 {
		if err := dr.h.LinkSetUp(cur); err != nil {
			return fmt.Errorf("bringing %s up: %w", dev, err)
		}
	}
	return nil
}

// syncIPIP gives tunl0 its address, or takes it away when no pool uses
// IPIP (tunl0 is the ipip module's fallback device: it cannot be deleted,
// only emptied and brought down).
func (dr *Driver) syncIPIP(addr netip.Addr, st *Stats) error {
	cur, err := dr.h.LinkByName(IPIPDevice)
	var notFound netlink.LinkNotFoundError
	if err != nil && !errors.As(err, &notFound) {
		return fmt.Errorf("reading %s: %w", IPIPDevice, err)
	}
	if !addr.IsValid() {
		if cur == nil {
			return nil
		}
		if err := dr.syncAddr(cur, netip.Addr{}, st); err != nil {
			return err
		}
		if cur.Attrs().Flags&net.FlagUp != 0 {
			st.DevicesChanged++
			return dr.h.LinkSetDown(cur)
		}
		return nil
	}
	if cur == nil {
		st.DevicesChanged++
		// EEXIST is success: on a kernel that had not loaded ipip yet, this
		// very request loads the module, which creates its fallback device
		// tunl0 in every namespace before the add itself runs (seen on
		// Debian's 6.1 kernel, internal/vmtest).
		if err := dr.h.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: IPIPDevice}}); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating %s (does the kernel have ipip?): %w", IPIPDevice, err)
		}
		if cur, err = dr.h.LinkByName(IPIPDevice); err != nil {
			return fmt.Errorf("reading the new %s: %w", IPIPDevice, err)
		}
	}
	if err := dr.syncAddr(cur, addr, st); err != nil {
		return err
	}
	if dr.IPIPMTU > 0 && cur.Attrs().MTU != dr.IPIPMTU {
		st.DevicesChanged++
		if err := dr.h.LinkSetMTU(cur, dr.IPIPMTU); err != nil {
			return fmt.Errorf("setting %s's MTU: %w", IPIPDevice, err)
		}
	}
	if cur.Attrs().Flags&net.FlagUp == 0 {
		st.DevicesChanged++
		return dr.h.LinkSetUp(cur)
	}
	return nil
}

// syncAddr leaves exactly addr as a host address (none when invalid:
// then the IPv4 ones go) on link, of addr's IP version; link-local IPv6
// addresses stay.
func (dr *Driver) syncAddr(link netlink.Link, addr netip.Addr, st *Stats) error {
	family, bits := netlink.FAMILY_V4, 32
	if addr.Is6() {
		family, bits = netlink.FAMILY_V6, 128
	}
	have, err := dr.h.AddrList(link, family)
	if err != nil {
		return fmt.Errorf("listing %s's addresses: %w", link.Attrs().Name, err)
	}
	found := false
	for _, h := range have {
		a, _ := netip.AddrFromSlice(h.IP)
		a = a.Unmap()
		if a == addr && maskBits(h.IPNet) == bits {
			found = true
			continue
		}
		if a.IsLinkLocalUnicast() {
			continue
		}
		st.DevicesChanged++
		if err := dr.h.AddrDel(link, &h); err != nil {
			return fmt.Errorf("removing %s from %s: %w", h.IPNet, link.Attrs().Name, err)
		}
	}
	if !found && addr.IsValid() {
		st.DevicesChanged++
		if err := dr.h.AddrAdd(link, &netlink.Addr{IPNet: &net.IPNet{IP: addr.AsSlice(), Mask: net.CIDRMask(bits, bits)}, Flags: unix.IFA_F_NODAD}); err != nil {
			return fmt.Errorf("adding %s to %s: %w", addr, link.Attrs().Name, err)
		}
	}
	return nil
}

func maskBits(n *net.IPNet) int { b, _ := n.Mask.Size(); return b }

// interfaceOf finds the interface holding addr and its MTU.
func (dr *Driver) interfaceOf(addr netip.Addr) (netlink.Link, int, error) {
	addrs, err := dr.h.AddrList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, 0, fmt.Errorf("listing addresses: %w", err)
	}
	for _, a := range addrs {
		if ip, ok := netip.AddrFromSlice(a.IP); ok && ip.Unmap() == addr {
			l, err := dr.h.LinkByIndex(a.LinkIndex)
			if err != nil {
				return nil, 0, fmt.Errorf("reading the interface of %s: %w", addr, err)
			}
			return l, l.Attrs().MTU, nil
		}
	}
	return nil, 0, fmt.Errorf("no interface has the node's address %s", addr)
}

// syncNeighbors keeps a VXLAN device's permanent ARP/NDP and FDB
// entries equal to d's entries for it (planNeighbors, planFDB).
func (dr *Driver) syncNeighbors(dev string, v6 bool, d Desired, st *Stats) error {
	link, err := dr.h.LinkByName(dev)
	if err != nil {
		return fmt.Errorf("reading %s: %w", dev, err)
	}
	idx := link.Attrs().Index
	family := netlink.FAMILY_V4
	if v6 {
		family = netlink.FAMILY_V6
	}
	want, wantFDB := map[netip.Addr]string{}, map[string]netip.Addr{}
	for _, n := range d.Neighbors {
		if n.Dev == dev {
			want[n.IP] = n.MAC
		}
	}
	for _, f := range d.FDB {
		if f.Dev == dev {
			wantFDB[f.MAC] = f.Dst
		}
	}
	have, err := dr.h.NeighList(idx, family)
	if err != nil {
		return fmt.Errorf("listing %s's neighbours: %w", dev, err)
	}
	errs := dr.applyNeighbors(have, planNeighbors(neighEntries(have, false), want), st, func(e neighEntry) *netlink.Neigh {
		return &netlink.Neigh{LinkIndex: idx, Family: family, Type: unix.RTN_UNICAST}
	})
	fdb, err := dr.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing %s's FDB: %w", dev, err))...)
	}
	errs = append(errs, dr.applyNeighbors(fdb, planFDB(neighEntries(fdb, true), wantFDB), st, func(e neighEntry) *netlink.Neigh {
		return &netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, Flags: netlink.NTF_SELF}
	})...)
	return errors.Join(errs...)
}

// neighEntries reads the kernel's entries for a plan; for the FDB
// (fdb) entries with no or a zero MAC are the kernel's own and left out
// of the plan (given an invalid address and no MAC that nothing wants).
func neighEntries(have []netlink.Neigh, fdb bool) []neighEntry {
	out := make([]neighEntry, len(have))
	for i, n := range have {
		ip, _ := netip.AddrFromSlice(n.IP)
		out[i] = neighEntry{ip: ip.Unmap(), mac: n.HardwareAddr.String(), permanent: n.State&netlink.NUD_PERMANENT != 0}
		if fdb && (n.HardwareAddr == nil || isZeroMAC(n.HardwareAddr)) {
			out[i] = neighEntry{}
		}
	}
	return out
}

// applyNeighbors applies a neighbour or FDB plan; base makes the kernel
// entry of an entry to add (the address, MAC and state are set here).
func (dr *Driver) applyNeighbors(have []netlink.Neigh, p neighPlan, st *Stats, base func(neighEntry) *netlink.Neigh) []error {
	var errs []error
	for _, i := range p.del {
		st.NeighborsChanged++
		if err := dr.h.NeighDel(&have[i]); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing neighbour/FDB entry %s %s: %w", have[i].IP, have[i].HardwareAddr, err))
		}
	}
	for _, e := range p.add {
		st.NeighborsChanged++
		n := base(e)
		n.State, n.IP = netlink.NUD_PERMANENT, e.ip.AsSlice()
		n.HardwareAddr, _ = net.ParseMAC(e.mac)
		if err := dr.h.NeighSet(n); err != nil {
			errs = append(errs, fmt.Errorf("adding neighbour/FDB entry %s %s: %w", e.ip, e.mac, err))
		}
	}
	return errs
}

func isZeroMAC(m net.HardwareAddr) bool {
	for _, b := range m {
		if b != 0 {
			return false
		}
	}
	return true
}

// syncRoutes adds the missing routes of one IP version and removes the
// ones it owns that are not wanted (planRoutes).
func (dr *Driver) syncRoutes(v6 bool, all []Route, st *Stats) error {
	family := netlink.FAMILY_V4
	if v6 {
		family = netlink.FAMILY_V6
	}
	var want []Route
	for _, r := range all {
		if r.Dst.Addr().Is6() == v6 {
			want = append(want, r)
		}
	}
	have, keys, err := dr.kernelRoutes(family)
	if err != nil {
		return err
	}
	own := ownership{workloadPrefixes: dr.WorkloadPrefixes, pools: dr.knownPools}
	p := planRoutes(keys, want, own, dr.unknownSince, dr.Now(), dr.WorkloadRouteGrace)
	for k := range dr.unknownSince {
		if k.dst.Addr().Is6() == v6 {
			delete(dr.unknownSince, k)
		}
	}
	maps.Copy(dr.unknownSince, p.unknownSince)
	var errs []error
	for j, i := range p.del {
		st.RoutesRemoved++
		k := keys[i]
		if p.delWorkload[j] {
			dr.log.Info("removing a workload route no endpoint explains", "dst", k.dst, "dev", k.dev, "grace", dr.WorkloadRouteGrace)
		} else {
			dr.log.Debug("removing route", "dst", k.dst, "gw", k.gw, "dev", k.dev)
		}
		if err := dr.h.RouteDel(&have[i]); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("removing route to %s: %w", k.dst, err))
		}
	}
	for _, r := range p.add {
		if err := dr.addRoute(r, st); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// kernelRoutes lists the main table's routes of felix's protocol (a
// default route is never ours and left out) and their keys.
func (dr *Driver) kernelRoutes(family int) ([]netlink.Route, []routeKey, error) {
	links, err := dr.h.LinkList()
	if err != nil {
		return nil, nil, fmt.Errorf("listing links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	all, err := dr.h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: RouteProtocol},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return nil, nil, fmt.Errorf("listing routes: %w", err)
	}
	var have []netlink.Route
	var keys []routeKey
	for _, r := range all {
		if r.Dst == nil {
			continue
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		k := routeKey{dst: netip.PrefixFrom(dst.Unmap(), maskBits(r.Dst)), dev: names[r.LinkIndex], onlink: r.Flags&unix.RTNH_F_ONLINK != 0}
		if r.Gw != nil {
			k.gw, _ = netip.AddrFromSlice(r.Gw)
			k.gw = k.gw.Unmap()
		}
		have, keys = append(have, r), append(keys, k)
	}
	return have, keys, nil
}

// addRoute adds (or replaces) a wanted route. A workload route whose
// interface the CNI has not made (or brought up) yet, or has removed, is
// no error.
func (dr *Driver) addRoute(w Route, st *Stats) error {
	bits := w.Dst.Addr().BitLen()
	r := &netlink.Route{Dst: &net.IPNet{IP: w.Dst.Addr().AsSlice(), Mask: net.CIDRMask(w.Dst.Bits(), bits)},
		Gw: w.Gw.AsSlice(), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
	if w.Dev != "" {
		l, err := dr.h.LinkByName(w.Dev)
		if err != nil {
			if w.Workload {
				return nil
			}
			return fmt.Errorf("route to %s: device %s: %w", w.Dst, w.Dev, err)
		}
		r.LinkIndex = l.Attrs().Index
	}
	if w.Workload {
		// As the CNI writes it (cni-plugin/wiring RouteMetric).
		r.Scope, r.Priority = netlink.SCOPE_LINK, workloadRouteMetric
	}
	if w.OnLink {
		r.Flags = int(netlink.FLAG_ONLINK)
	}
	st.RoutesAdded++
	if err := dr.h.RouteReplace(r); err != nil && !(w.Workload && errors.Is(err, syscall.ENETDOWN)) {
		return fmt.Errorf("adding route to %s via %s %s: %w", w.Dst, w.Gw, w.Dev, err)
	}
	return nil
}

// workloadRouteMetric is the metric the CNI plugin gives workload routes.
const workloadRouteMetric = 1024

// syncMTUFile writes the pods' MTU to MTUFile (atomically) when it
// changed.
func (dr *Driver) syncMTUFile(d Desired, mtus map[string]int) error {
	if dr.MTUFile == "" || mtus == nil {
		return nil
	}
	mtu, ok := PodMTU(mtus, dr.mtuPattern(), d)
	// Configured tunnel MTUs replace the derived one (the smallest of the
	// encapsulations in use).
	configured := 0
	for _, conf := range []struct {
		used bool
		mtu  int
	}{{d.IPIP.IsValid(), dr.IPIPMTU}, {d.VXLAN != nil, dr.VXLANMTU}, {d.VXLANv6 != nil, dr.VXLANMTUV6},
		{d.Wireguard[0].Config.Enabled, d.Wireguard[0].Config.MTU}, {d.Wireguard[1].Config.Enabled, d.Wireguard[1].Config.MTU}} {
		if conf.used && conf.mtu > 0 && (configured == 0 || conf.mtu < configured) {
			configured = conf.mtu
		}
	}
	if configured > 0 {
		mtu, ok = configured, true
	}
	if !ok || mtu == dr.lastMTU {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(dr.MTUFile), 0o755); err != nil {
		return fmt.Errorf("writing the MTU file: %w", err)
	}
	tmp := dr.MTUFile + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(mtu)), 0o644); err != nil {
		return fmt.Errorf("writing the MTU file: %w", err)
	}
	if err := os.Rename(tmp, dr.MTUFile); err != nil {
		return fmt.Errorf("writing the MTU file: %w", err)
	}
	dr.log.Info("pod MTU", "mtu", mtu, "file", dr.MTUFile)
	dr.lastMTU = mtu
	return nil
}

// linkMTUs are the MTUs of the namespace's links by name.
func (dr *Driver) linkMTUs() (map[string]int, error) {
	links, err := dr.h.LinkList()
	if err != nil {
		return nil, fmt.Errorf("listing links for the MTU: %w", err)
	}
	mtus := map[string]int{}
	for _, l := range links {
		mtus[l.Attrs().Name] = l.Attrs().MTU
	}
	return mtus, nil
}

func (dr *Driver) mtuPattern() *regexp.Regexp {
	if dr.MTUIfacePattern == nil {
		return DefaultMTUIfacePattern
	}
	return dr.MTUIfacePattern
}

// syncWireguard applies both IP versions' WireGuard state and reports
// the devices' public keys.
func (dr *Driver) syncWireguard(d Desired, mtus map[string]int) error {
	host, _ := PodMTU(mtus, dr.mtuPattern(), Desired{}) // the underlay's smallest MTU
	var errs []error
	for i, w := range dr.Wireguard {
		if w == nil {
			continue
		}
		key, err := w.Apply(d.Wireguard[i], host)
		errs = append(errs, err)
		if dr.OnWireguardKey != nil {
			dr.OnWireguardKey(i == 1, key)
		}
	}
	return errors.Join(errs...)
}
