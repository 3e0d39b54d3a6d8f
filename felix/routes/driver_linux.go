package routes

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/tabbynet/tabby/felix/infra"
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
	if err := dr.syncMTUFile(d); err != nil {
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
		if err := dr.h.LinkAdd(&netlink.Iptun{LinkAttrs: netlink.LinkAttrs{Name: IPIPDevice}}); err != nil {
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
// entries equal to d's entries for it.
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
	var errs []error
	// ARP/NDP: remote VTEP address -> MAC.
	want := map[netip.Addr]string{}
	for _, n := range d.Neighbors {
		if n.Dev == dev {
			want[n.IP] = n.MAC
		}
	}
	have, err := dr.h.NeighList(idx, family)
	if err != nil {
		return fmt.Errorf("listing %s's neighbours: %w", dev, err)
	}
	for _, n := range have {
		ip, _ := netip.AddrFromSlice(n.IP)
		ip = ip.Unmap()
		if mac, ok := want[ip]; ok && mac == n.HardwareAddr.String() && n.State&netlink.NUD_PERMANENT != 0 {
			delete(want, ip)
			continue
		}
		if _, ok := want[ip]; ok || n.State&netlink.NUD_PERMANENT != 0 {
			st.NeighborsChanged++
			if err := dr.h.NeighDel(&n); err != nil && !errors.Is(err, syscall.ENOENT) {
				errs = append(errs, fmt.Errorf("removing neighbour %s: %w", ip, err))
			}
		}
	}
	for ip, mac := range want {
		st.NeighborsChanged++
		hw, _ := net.ParseMAC(mac)
		if err := dr.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: family, State: netlink.NUD_PERMANENT,
			Type: unix.RTN_UNICAST, IP: ip.AsSlice(), HardwareAddr: hw}); err != nil {
			errs = append(errs, fmt.Errorf("adding neighbour %s %s: %w", ip, mac, err))
		}
	}
	// FDB: remote VTEP MAC -> remote node address.
	wantFDB := map[string]netip.Addr{}
	for _, f := range d.FDB {
		if f.Dev == dev {
			wantFDB[f.MAC] = f.Dst
		}
	}
	fdb, err := dr.h.NeighList(idx, unix.AF_BRIDGE)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("listing %s's FDB: %w", dev, err))...)
	}
	for _, f := range fdb {
		if f.HardwareAddr == nil || isZeroMAC(f.HardwareAddr) {
			continue
		}
		mac := f.HardwareAddr.String()
		dst, _ := netip.AddrFromSlice(f.IP)
		if w, ok := wantFDB[mac]; ok && w == dst.Unmap() {
			delete(wantFDB, mac)
			continue
		}
		if f.State&netlink.NUD_PERMANENT == 0 {
			continue // learnt entries age out on their own
		}
		st.NeighborsChanged++
		if err := dr.h.NeighDel(&f); err != nil && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("removing FDB entry %s: %w", mac, err))
		}
	}
	for mac, dst := range wantFDB {
		st.NeighborsChanged++
		hw, _ := net.ParseMAC(mac)
		if err := dr.h.NeighSet(&netlink.Neigh{LinkIndex: idx, Family: unix.AF_BRIDGE, State: netlink.NUD_PERMANENT,
			Flags: netlink.NTF_SELF, IP: dst.AsSlice(), HardwareAddr: hw}); err != nil {
			errs = append(errs, fmt.Errorf("adding FDB entry %s -> %s: %w", mac, dst, err))
		}
	}
	return errors.Join(errs...)
}

func isZeroMAC(m net.HardwareAddr) bool {
	for _, b := range m {
		if b != 0 {
			return false
		}
	}
	return true
}

// routeKey identifies a route for the diff.
type routeKey struct {
	dst    netip.Prefix
	gw     netip.Addr
	dev    string
	onlink bool
}

// syncRoutes adds the missing routes of one IP version and removes the
// ones it owns that are not wanted.
func (dr *Driver) syncRoutes(v6 bool, all []Route, st *Stats) error {
	family, bits := netlink.FAMILY_V4, 32
	if v6 {
		family, bits = netlink.FAMILY_V6, 128
	}
	var want []Route
	for _, r := range all {
		if r.Dst.Addr().Is6() == v6 {
			want = append(want, r)
		}
	}
	links, err := dr.h.LinkList()
	if err != nil {
		return fmt.Errorf("listing links: %w", err)
	}
	names := map[int]string{}
	for _, l := range links {
		names[l.Attrs().Index] = l.Attrs().Name
	}
	have, err := dr.h.RouteListFiltered(family, &netlink.Route{Table: unix.RT_TABLE_MAIN, Protocol: RouteProtocol},
		netlink.RT_FILTER_TABLE|netlink.RT_FILTER_PROTOCOL)
	if err != nil {
		return fmt.Errorf("listing routes: %w", err)
	}
	wantKeys := map[routeKey]Route{}
	wantDst := map[netip.Prefix]routeKey{}
	for _, r := range want {
		k := routeKey{dst: r.Dst, gw: r.Gw, dev: r.Dev, onlink: r.OnLink}
		wantKeys[k] = r
		wantDst[r.Dst] = k
	}
	var errs []error
	now := dr.Now()
	seenUnknown := map[routeKey]bool{}
	for _, r := range have {
		if r.Dst == nil {
			continue // a default route is never ours
		}
		dst, ok := netip.AddrFromSlice(r.Dst.IP)
		if !ok {
			continue
		}
		dst = dst.Unmap()
		k := routeKey{dst: netip.PrefixFrom(dst, maskBits(r.Dst)), dev: names[r.LinkIndex], onlink: r.Flags&unix.RTNH_F_ONLINK != 0}
		if r.Gw != nil {
			k.gw, _ = netip.AddrFromSlice(r.Gw)
			k.gw = k.gw.Unmap()
		}
		if dr.isWorkloadDev(k.dev) {
			if k.gw.IsValid() || k.onlink {
				continue // not the shape of a workload route: not ours
			}
			if _, ok := wantKeys[k]; ok {
				delete(wantKeys, k)
				continue
			}
			// Unknown: maybe the CNI's for an endpoint felix has not
			// heard of yet. Removed only after the grace period.
			seenUnknown[k] = true
			since, ok := dr.unknownSince[k]
			if !ok {
				dr.unknownSince[k] = now
				continue
			}
			if now.Sub(since) < dr.WorkloadRouteGrace {
				continue
			}
			st.RoutesRemoved++
			dr.log.Info("removing a workload route no endpoint explains", "dst", k.dst, "dev", k.dev, "unknownFor", now.Sub(since))
			if err := dr.h.RouteDel(&r); err != nil && !errors.Is(err, syscall.ESRCH) {
				errs = append(errs, fmt.Errorf("removing route to %s: %w", k.dst, err))
			}
			continue
		}
		if !dr.owns(k) {
			continue
		}
		w, wanted := wantDst[k.dst]
		if wanted && (w == k || (w.dev == "" && w.gw == k.gw && w.onlink == k.onlink)) {
			delete(wantKeys, w)
			continue
		}
		st.RoutesRemoved++
		dr.log.Debug("removing route", "dst", k.dst, "gw", k.gw, "dev", k.dev)
		if err := dr.h.RouteDel(&r); err != nil && !errors.Is(err, syscall.ESRCH) {
			errs = append(errs, fmt.Errorf("removing route to %s: %w", k.dst, err))
		}
	}
	for k := range dr.unknownSince {
		if k.dst.Addr().Is6() == v6 && !seenUnknown[k] {
			delete(dr.unknownSince, k)
		}
	}
	keys := make([]routeKey, 0, len(wantKeys))
	for k := range wantKeys {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b routeKey) int { return infra.ComparePrefix(a.dst, b.dst) })
	for _, k := range keys {
		r := &netlink.Route{Dst: &net.IPNet{IP: k.dst.Addr().AsSlice(), Mask: net.CIDRMask(k.dst.Bits(), bits)},
			Gw: k.gw.AsSlice(), Protocol: RouteProtocol, Table: unix.RT_TABLE_MAIN}
		if k.dev != "" {
			l, err := dr.h.LinkByName(k.dev)
			if err != nil {
				if wantKeys[k].Workload {
					continue // the CNI has not made (or has removed) the interface
				}
				errs = append(errs, fmt.Errorf("route to %s: device %s: %w", k.dst, k.dev, err))
				continue
			}
			r.LinkIndex = l.Attrs().Index
		}
		if wantKeys[k].Workload {
			// As the CNI writes it (cni-plugin/wiring RouteMetric).
			r.Scope, r.Priority = netlink.SCOPE_LINK, workloadRouteMetric
		}
		if k.onlink {
			r.Flags = int(netlink.FLAG_ONLINK)
		}
		st.RoutesAdded++
		if err := dr.h.RouteReplace(r); err != nil && wantKeys[k].Workload && errors.Is(err, syscall.ENETDOWN) {
			continue // the CNI has not brought the interface up yet
		} else if err != nil {
			errs = append(errs, fmt.Errorf("adding route to %s via %s %s: %w", k.dst, k.gw, k.dev, err))
		}
	}
	return errors.Join(errs...)
}

// workloadRouteMetric is the metric the CNI plugin gives workload routes.
const workloadRouteMetric = 1024

func (dr *Driver) isWorkloadDev(dev string) bool {
	for _, p := range dr.WorkloadPrefixes {
		if strings.HasPrefix(dev, p) {
			return true
		}
	}
	return false
}

// owns says whether a kernel route (already of felix's protocol) is the
// manager's: through a tunnel device, or via a gateway into a pool it has
// seen, and never on a workload interface.
func (dr *Driver) owns(k routeKey) bool {
	for _, p := range dr.WorkloadPrefixes {
		if strings.HasPrefix(k.dev, p) {
			return false
		}
	}
	if k.dev == VXLANDevice || k.dev == VXLANDeviceV6 || k.dev == IPIPDevice {
		return true
	}
	if !k.gw.IsValid() {
		return false
	}
	for p := range dr.knownPools {
		if p.Contains(k.dst.Addr()) && p.Bits() <= k.dst.Bits() {
			return true
		}
	}
	return false
}

// syncMTUFile writes the pods' MTU to MTUFile (atomically) when it
// changed.
func (dr *Driver) syncMTUFile(d Desired) error {
	if dr.MTUFile == "" {
		return nil
	}
	links, err := dr.h.LinkList()
	if err != nil {
		return fmt.Errorf("listing links for the MTU: %w", err)
	}
	mtus := map[string]int{}
	for _, l := range links {
		mtus[l.Attrs().Name] = l.Attrs().MTU
	}
	pattern := dr.MTUIfacePattern
	if pattern == nil {
		pattern = DefaultMTUIfacePattern
	}
	mtu, ok := PodMTU(mtus, pattern, d)
	// Configured tunnel MTUs replace the derived one (the smallest of the
	// encapsulations in use).
	configured := 0
	for _, conf := range []struct {
		used bool
		mtu  int
	}{{d.IPIP.IsValid(), dr.IPIPMTU}, {d.VXLAN != nil, dr.VXLANMTU}, {d.VXLANv6 != nil, dr.VXLANMTUV6}} {
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
