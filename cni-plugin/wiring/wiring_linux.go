package wiring

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"syscall"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Pod describes one pod interface.
type Pod struct {
	NetNSPath         string      // the pod's network namespace
	ContainerIf       string      // usually eth0
	HostIf            string      // cali...
	Addrs             []net.IPNet // the pod's addresses, each /32 or /128
	MTU               int
	AllowIPForwarding bool
	HostNS            ns.NetNS // where the host end and routes go
	// Owner marks the host end (its alias, see OwnerMark) with the
	// attachment it belongs to: Teardown removes only a host end so
	// marked.
	Owner string
}

// Result is what Setup made.
type Result struct {
	HostMAC      string
	ContainerMAC string
	Sandbox      string
	// DefaultV4 and DefaultV6 say which families' default routes go
	// through this interface (not when another interface of the pod had
	// them first).
	DefaultV4, DefaultV6 bool
}

// Setup wires the pod. On error nothing it created is left behind.
func Setup(p Pod) (*Result, error) {
	prep, err := Prepare(p, hasV6(p.Addrs))
	if err != nil {
		return nil, err
	}
	if err := prep.Configure(p.Addrs); err != nil {
		return nil, err
	}
	return prep.Result, nil
}

// Prepared is a pod's veth pair, created and up on both sides but with no
// address or route yet, so it can be made while IPAM picks the addresses.
type Prepared struct {
	Result *Result
	pod    Pod
}

// Prepare creates the veth pair and sets up the host end (MAC, proxy-ARP,
// forwarding; with ipv6 also proxy-NDP and no DAD). On error nothing it
// created is left behind; once it succeeds, the caller owns the pair until
// Configure succeeds (Abandon removes it).
func Prepare(p Pod, ipv6 bool) (prep *Prepared, err error) {
	podNS, err := ns.GetNS(p.NetNSPath)
	if err != nil {
		return nil, fmt.Errorf("opening pod netns %s: %w", p.NetNSPath, err)
	}
	defer podNS.Close()

	// A stale host end with our name (a pod re-created with the same
	// name) would block the new one: remove it first, as Calico does, but
	// only if it is a veth.
	if err := p.HostNS.Do(func(ns.NetNS) error { return removeStaleHostEnd(p.HostIf) }); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = Teardown(p.HostNS, p.HostIf, p.Owner, p.NetNSPath)
		}
	}()

	res := &Result{Sandbox: p.NetNSPath}
	err = podNS.Do(func(ns.NetNS) error {
		mac, err := makeVeth(p)
		res.ContainerMAC = mac
		return err
	})
	if err != nil {
		return nil, err
	}
	if err = p.HostNS.Do(func(ns.NetNS) error { return setupHostSide(p, ipv6) }); err != nil {
		return nil, err
	}
	res.HostMAC = HostMAC
	if err = podNS.Do(func(ns.NetNS) error { return upPodSide(p, ipv6) }); err != nil {
		return nil, err
	}
	return &Prepared{Result: res, pod: p}, nil
}

// Configure gives the prepared pair its addresses and routes (pod and
// node side). On error it removes the pair.
func (pr *Prepared) Configure(addrs []net.IPNet) (err error) {
	p := pr.pod
	p.Addrs = addrs
	defer func() {
		if err != nil {
			pr.Abandon()
		}
	}()
	podNS, err := ns.GetNS(p.NetNSPath)
	if err != nil {
		return fmt.Errorf("opening pod netns %s: %w", p.NetNSPath, err)
	}
	defer podNS.Close()
	if hasV6(addrs) {
		// Addresses turned out to include IPv6 the pair was not prepared
		// for: set the IPv6 knobs now.
		if err := p.HostNS.Do(func(ns.NetNS) error { return writeSysctls(hostV6Sysctls(p.HostIf)) }); err != nil {
			return err
		}
	}
	// The pod's side and the node's route are independent: do them at
	// the same time (each Do runs on its own locked thread).
	hostErr := make(chan error, 1)
	go func() { hostErr <- p.HostNS.Do(func(ns.NetNS) error { return addHostRoutes(p) }) }()
	podErr := podNS.Do(func(ns.NetNS) (err error) {
		pr.Result.DefaultV4, pr.Result.DefaultV6, err = setupPodSide(p)
		return err
	})
	return errors.Join(podErr, <-hostErr)
}

// Abandon removes a prepared pair (e.g. when IPAM failed).
func (pr *Prepared) Abandon() {
	_ = Teardown(pr.pod.HostNS, pr.pod.HostIf, pr.pod.Owner, pr.pod.NetNSPath)
}

func hasV6(addrs []net.IPNet) bool {
	for _, a := range addrs {
		if a.IP.To4() == nil {
			return true
		}
	}
	return false
}

// makeVeth creates the pair from inside the pod's namespace: the pod end
// there, the host end (with Calico's MAC and the same MTU) straight in the
// node's namespace, in one netlink request. It returns the pod end's MAC.
func makeVeth(p Pod) (string, error) {
	hostMAC, _ := net.ParseMAC(HostMAC)
	veth := &netlink.Veth{
		LinkAttrs:        netlink.LinkAttrs{Name: p.ContainerIf, MTU: p.MTU},
		PeerName:         p.HostIf,
		PeerHardwareAddr: hostMAC,
		PeerNamespace:    netlink.NsFd(int(p.HostNS.Fd())),
	}
	if err := netlink.LinkAdd(veth); err != nil {
		if errors.Is(err, syscall.EEXIST) {
			if _, lerr := netlink.LinkByName(p.ContainerIf); lerr == nil {
				return "", fmt.Errorf("creating veth %s/%s: the pod already has an interface named %s", p.ContainerIf, p.HostIf, p.ContainerIf)
			}
		}
		return "", fmt.Errorf("creating veth %s/%s: %w", p.ContainerIf, p.HostIf, err)
	}
	cont, err := netlink.LinkByName(p.ContainerIf)
	if err != nil {
		return "", fmt.Errorf("finding %s in the pod: %w", p.ContainerIf, err)
	}
	return cont.Attrs().HardwareAddr.String(), nil
}

func setupHostSide(p Pod, ipv6 bool) error {
	link, err := netlink.LinkByName(p.HostIf)
	if err != nil {
		return fmt.Errorf("finding %s on the node: %w", p.HostIf, err)
	}
	sysctls := map[string]string{
		"ipv4/conf/" + p.HostIf + "/proxy_arp":    "1",
		"ipv4/neigh/" + p.HostIf + "/proxy_delay": "0",
		"ipv4/conf/" + p.HostIf + "/forwarding":   "1",
	}
	if ipv6 {
		for k, v := range hostV6Sysctls(p.HostIf) {
			sysctls[k] = v
		}
	}
	if err := writeSysctls(sysctls); err != nil {
		return err
	}
	if p.Owner != "" {
		if err := netlink.LinkSetAlias(link, OwnerMark(p.Owner)); err != nil {
			return fmt.Errorf("marking %s as %s's: %w", p.HostIf, p.Owner, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", p.HostIf, err)
	}
	return nil
}

// hostV6Sysctls are the host end's IPv6 settings. No DAD: the link-local
// next hop must answer the moment the link is up.
func hostV6Sysctls(hostIf string) map[string]string {
	return map[string]string{
		"ipv6/conf/" + hostIf + "/accept_dad": "0",
		"ipv6/conf/" + hostIf + "/proxy_ndp":  "1",
		"ipv6/conf/" + hostIf + "/accept_ra":  "0",
		"ipv6/conf/" + hostIf + "/forwarding": "1",
	}
}

func writeSysctls(m map[string]string) error {
	for k, v := range m {
		if err := writeSysctl(k, v); err != nil {
			return err
		}
	}
	return nil
}

// upPodSide brings the pod's interface up (IPv6 without DAD, so its
// address is usable at once).
func upPodSide(p Pod, ipv6 bool) error {
	link, err := netlink.LinkByName(p.ContainerIf)
	if err != nil {
		return fmt.Errorf("finding %s in the pod: %w", p.ContainerIf, err)
	}
	if ipv6 {
		if err := writeSysctl("ipv6/conf/"+p.ContainerIf+"/accept_dad", "0"); err != nil {
			return err
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", p.ContainerIf, err)
	}
	return nil
}

// setupPodSide gives the pod's interface its addresses and routes, and
// says which families' default routes go through it: none of a family
// whose default route the pod already has through another interface (its
// eth0, for a net1), which keeps it there. The pod's routes are listed
// once per family for that, not once per route.
func setupPodSide(p Pod) (defaultV4, defaultV6 bool, err error) {
	link, err := netlink.LinkByName(p.ContainerIf)
	if err != nil {
		return false, false, fmt.Errorf("finding %s in the pod: %w", p.ContainerIf, err)
	}
	if hasV6(p.Addrs) {
		if err := writeSysctl("ipv6/conf/"+p.ContainerIf+"/accept_dad", "0"); err != nil {
			return false, false, err
		}
	}
	for _, a := range p.Addrs {
		a := a
		if err := netlink.AddrAdd(link, &netlink.Addr{IPNet: &a}); err != nil {
			return false, false, fmt.Errorf("adding %s to %s: %w", a.String(), p.ContainerIf, err)
		}
	}
	idx := link.Attrs().Index
	viaOther := map[int]bool{} // family -> default route through another interface
	for _, r := range podRoutes(idx, p.Addrs) {
		r := r
		fam := routeFamily(r)
		other, ok := viaOther[fam]
		if !ok {
			other = defaultViaOther(idx, r)
			viaOther[fam] = other
		}
		if other {
			continue
		}
		if err := netlink.RouteAdd(&r); err != nil && !errors.Is(err, syscall.EEXIST) {
			return false, false, fmt.Errorf("adding pod route %s: %w", r.String(), err)
		}
		if ones, _ := r.Dst.Mask.Size(); ones == 0 {
			if fam == netlink.FAMILY_V4 {
				defaultV4 = true
			} else {
				defaultV6 = true
			}
		}
	}
	if p.AllowIPForwarding {
		if err := writeSysctl("ipv4/ip_forward", "1"); err != nil {
			return false, false, err
		}
		if hasV6(p.Addrs) {
			if err := writeSysctl("ipv6/conf/all/forwarding", "1"); err != nil {
				return false, false, err
			}
		}
	}
	return defaultV4, defaultV6, nil
}

// defaultViaOther reports whether r is of a family whose default route
// the pod already has through another interface than ifIndex. It runs
// in the pod's namespace.
func defaultViaOther(ifIndex int, r netlink.Route) bool {
	routes, err := netlink.RouteListFiltered(routeFamily(r), &netlink.Route{Table: syscall.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return false
	}
	for _, have := range routes {
		if ones := 0; have.Dst != nil {
			ones, _ = have.Dst.Mask.Size()
			if ones != 0 {
				continue
			}
		}
		if have.LinkIndex != ifIndex && have.Gw != nil {
			return true
		}
	}
	return false
}

// routeFamily is r's address family (netlink.FAMILY_V4 or _V6).
func routeFamily(r netlink.Route) int {
	if r.Dst != nil && r.Dst.IP.To4() == nil {
		return netlink.FAMILY_V6
	}
	return netlink.FAMILY_V4
}

// Gateways says which families' default routes go through the pod
// interface (none when another interface of the pod already had them).
// It runs in the pod's namespace.
func gateways(ifIndex int, addrs []net.IPNet) (v4, v6 bool) {
	for _, r := range podRoutes(ifIndex, addrs) {
		if ones, _ := r.Dst.Mask.Size(); ones != 0 || defaultViaOther(ifIndex, r) {
			continue
		}
		if r.Dst.IP.To4() != nil {
			v4 = true
		} else {
			v6 = true
		}
	}
	return v4, v6
}

// podRoutes are the routes inside the pod: the gateway as a link route and
// the default through it, per address family in use.
func podRoutes(ifIndex int, addrs []net.IPNet) []netlink.Route {
	var rs []netlink.Route
	v4, v6 := false, false
	for _, a := range addrs {
		if a.IP.To4() != nil {
			v4 = true
		} else {
			v6 = true
		}
	}
	if v4 {
		rs = append(rs,
			netlink.Route{LinkIndex: ifIndex, Dst: &net.IPNet{IP: GatewayIPv4.To4(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK},
			netlink.Route{LinkIndex: ifIndex, Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, Gw: GatewayIPv4.To4()})
	}
	if v6 {
		rs = append(rs, netlink.Route{LinkIndex: ifIndex, Dst: &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, Gw: HostLinkLocalIPv6})
	}
	return rs
}

// hostRoutes are the node's routes to the pod.
func hostRoutes(ifIndex int, addrs []net.IPNet) []netlink.Route {
	rs := make([]netlink.Route, 0, len(addrs))
	for _, a := range addrs {
		bits := 32
		if a.IP.To4() == nil {
			bits = 128
		}
		rs = append(rs, netlink.Route{
			LinkIndex: ifIndex,
			Dst:       &net.IPNet{IP: a.IP, Mask: net.CIDRMask(bits, bits)},
			Scope:     netlink.SCOPE_LINK,
			Priority:  RouteMetric,
			Protocol:  netlink.RouteProtocol(syscall.RTPROT_BOOT),
		})
	}
	return rs
}

func addHostRoutes(p Pod) error {
	link, err := netlink.LinkByName(p.HostIf)
	if err != nil {
		return fmt.Errorf("finding %s on the node: %w", p.HostIf, err)
	}
	for _, r := range hostRoutes(link.Attrs().Index, p.Addrs) {
		r := r
		// Replace: a stale route to a reused address must point here now.
		if err := netlink.RouteReplace(&r); err != nil {
			return fmt.Errorf("adding node route to %s via %s: %w", r.Dst, p.HostIf, err)
		}
	}
	return nil
}

// Teardown removes the pod's veth pair (and with it the node routes) if
// its host end is this attachment's: a veth marked with owner, or an
// unmarked veth (made before marks, or a half-made pair) whose peer is in
// the pod's namespace at netnsPath. It never deletes a link by name
// alone, and never touches the pod's namespace: removing the host end
// removes the pair. A missing link or namespace is not an error.
func Teardown(hostNS ns.NetNS, hostIf, owner, netnsPath string) error {
	err := hostNS.Do(func(ns.NetNS) error {
		link, err := linkIfExists(hostIf)
		if link == nil || err != nil || !ownedVeth(link, owner, netnsPath) {
			return err
		}
		if err := netlink.LinkDel(link); err != nil && !errors.Is(err, syscall.ENODEV) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("removing %s: %w", hostIf, err)
	}
	return nil
}

// peerIn reports whether link's peer is in the namespace at path. It runs
// in the link's namespace, after the link was read (reading it gives the
// peer's namespace an id there).
func peerIn(link netlink.Link, path string) bool {
	if path == "" {
		return false
	}
	podNS, err := ns.GetNS(path)
	if err != nil {
		return false
	}
	defer podNS.Close()
	id, err := netlink.GetNetNsIdByFd(int(podNS.Fd()))
	return err == nil && id >= 0 && link.Attrs().NetNsID == id
}

// linkIfExists returns the link named name (nil, nil when there is none).
func linkIfExists(name string) (netlink.Link, error) {
	link, err := netlink.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) {
			return nil, nil
		}
		return nil, err
	}
	return link, nil
}

// ownedVeth reports whether link is the host end of the attachment owner
// made: a veth with owner's mark, or without any mark but with its peer
// in the namespace at netnsPath. It runs in the link's namespace.
func ownedVeth(link netlink.Link, owner, netnsPath string) bool {
	if _, ok := link.(*netlink.Veth); !ok {
		return false
	}
	if alias := link.Attrs().Alias; alias != "" {
		return owner != "" && alias == OwnerMark(owner)
	}
	return peerIn(link, netnsPath)
}

// Owned reports whether the node has a link named hostIf and whether it
// is owner's veth (see Teardown; an unmarked veth counts as owned only
// with netnsPath naming its peer's namespace).
func Owned(hostNS ns.NetNS, hostIf, owner, netnsPath string) (exists, owned bool, err error) {
	err = hostNS.Do(func(ns.NetNS) error {
		link, err := linkIfExists(hostIf)
		if link != nil {
			exists, owned = true, ownedVeth(link, owner, netnsPath)
		}
		return err
	})
	return exists, owned, err
}

// HostVeths lists the node's veths with their owner marks ("" when
// unmarked).
func HostVeths(hostNS ns.NetNS) (map[string]string, error) {
	out := map[string]string{}
	err := hostNS.Do(func(ns.NetNS) error {
		links, err := netlink.LinkList()
		if err != nil {
			return err
		}
		for _, l := range links {
			if _, ok := l.(*netlink.Veth); ok {
				out[l.Attrs().Name] = l.Attrs().Alias
			}
		}
		return nil
	})
	return out, err
}

// removeStaleHostEnd removes a veth named hostIf left by an earlier
// sandbox; any other kind of link with that name is not ours and makes
// the ADD fail.
func removeStaleHostEnd(hostIf string) error {
	link, err := linkIfExists(hostIf)
	if link == nil || err != nil {
		return err
	}
	if _, ok := link.(*netlink.Veth); !ok {
		return fmt.Errorf("the node has a %s link named %s, not a pod veth: not touching it", link.Type(), hostIf)
	}
	if err := netlink.LinkDel(link); err != nil && !errors.Is(err, syscall.ENODEV) {
		return fmt.Errorf("removing stale %s: %w", hostIf, err)
	}
	return nil
}

func writeSysctl(key, value string) error {
	path := filepath.Join("/proc/sys/net", key)
	if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
		return fmt.Errorf("setting %s=%s: %w", path, value, err)
	}
	return nil
}

// IsNodeNetNS reports whether the namespace at path is the node's own:
// hostNS (where host ends go) or PID 1's (the host's, when the plugin
// runs elsewhere). A pod is never wired there, and nothing in it is ever
// removed by a pod's DEL.
func IsNodeNetNS(hostNS ns.NetNS, path string) (bool, error) {
	var pod, st syscall.Stat_t
	if err := syscall.Stat(path, &pod); err != nil {
		return false, fmt.Errorf("reading %s: %w", path, err)
	}
	if err := syscall.Fstat(int(hostNS.Fd()), &st); err != nil {
		return false, fmt.Errorf("reading the node's namespace: %w", err)
	}
	if st.Dev == pod.Dev && st.Ino == pod.Ino {
		return true, nil
	}
	// PID 1's namespace may be unreadable (no privilege in a test): then
	// only hostNS counts.
	if err := syscall.Stat("/proc/1/ns/net", &st); err == nil && st.Dev == pod.Dev && st.Ino == pod.Ino {
		return true, nil
	}
	return false, nil
}
