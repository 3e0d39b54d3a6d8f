//go:build privileged

package e2e

import (
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// pod is one workload namespace wired like Calico's CNI does it: a veth
// whose host side (cali...) is in the node namespace with proxy ARP and a
// /32 route to the pod, and whose pod side eth0 has the pod's /32 and a
// default route via 169.254.1.1.
type pod struct {
	name, iface string
	ip          net.IP
	netns       ns.NetNS
}

const (
	tcpPortA = 8080
	tcpPortB = 9090
	udpPort  = 5353
	timeout  = 400 * time.Millisecond
)

func writeSysctl(key, val string) error {
	return os.WriteFile(filepath.Join("/proc/sys", key), []byte(val), 0o644)
}

// newNode creates the node namespace: IP forwarding on, and an
// uplink with a default route so that proxy ARP has a route to answer for
// 169.254.1.1 (on a real node that is the node's own default route).
func newNode(t testing.TB) ns.NetNS {
	node := netnstest.New(t)
	err := node.Do(func(ns.NetNS) error {
		if err := writeSysctl("net/ipv4/ip_forward", "1"); err != nil {
			return err
		}
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// A veth pair stands in for the uplink (dummy links need a module
		// some hosts lack).
		up := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "uplink"}, PeerName: "uplink-peer"}
		if err := netlink.LinkAdd(up); err != nil {
			return fmt.Errorf("adding uplink: %w", err)
		}
		for _, n := range []string{"uplink", "uplink-peer"} {
			l, err := netlink.LinkByName(n)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
		}
		addr, _ := netlink.ParseAddr("192.168.200.1/24")
		if err := netlink.AddrAdd(up, addr); err != nil {
			return err
		}
		upLink, err := netlink.LinkByName("uplink")
		if err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: upLink.Attrs().Index, Gw: net.ParseIP("192.168.200.254")})
	})
	if err != nil {
		t.Fatalf("setting up node namespace: %v", err)
	}
	return node
}

func newPod(t testing.TB, node ns.NetNS, name, iface, ip string) *pod {
	p := &pod{name: name, iface: iface, ip: net.ParseIP(ip).To4(), netns: netnstest.New(t)}
	err := node.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: iface}, PeerName: "tmp" + iface[4:]}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("adding veth: %w", err)
		}
		peer, err := netlink.LinkByName(veth.PeerName)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetNsFd(peer, int(p.netns.Fd())); err != nil {
			return err
		}
		host, err := netlink.LinkByName(iface)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(host); err != nil {
			return err
		}
		if err := writeSysctl("net/ipv4/conf/"+iface+"/proxy_arp", "1"); err != nil {
			return err
		}
		if err := writeSysctl("net/ipv4/neigh/"+iface+"/proxy_delay", "0"); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: host.Attrs().Index, Scope: netlink.SCOPE_LINK,
			Dst: &net.IPNet{IP: p.ip, Mask: net.CIDRMask(32, 32)}})
	})
	if err != nil {
		t.Fatalf("wiring %s in the node: %v", name, err)
	}
	err = p.netns.Do(func(ns.NetNS) error {
		for _, l := range []string{"lo", "tmp" + iface[4:]} {
			link, err := netlink.LinkByName(l)
			if err != nil {
				return err
			}
			if l != "lo" {
				if err := netlink.LinkSetName(link, "eth0"); err != nil {
					return err
				}
			}
			if err := netlink.LinkSetUp(link); err != nil {
				return err
			}
		}
		eth0, err := netlink.LinkByName("eth0")
		if err != nil {
			return err
		}
		if err := netlink.AddrAdd(eth0, &netlink.Addr{IPNet: &net.IPNet{IP: p.ip, Mask: net.CIDRMask(32, 32)}}); err != nil {
			return err
		}
		gw := net.IPv4(169, 254, 1, 1)
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Scope: netlink.SCOPE_LINK,
			Dst: &net.IPNet{IP: gw, Mask: net.CIDRMask(32, 32)}}); err != nil {
			return err
		}
		return netlink.RouteAdd(&netlink.Route{LinkIndex: eth0.Attrs().Index, Gw: gw})
	})
	if err != nil {
		t.Fatalf("wiring %s's namespace: %v", name, err)
	}
	waitOperUp(t, node, iface)
	waitOperUp(t, p.netns, "eth0")
	p.serve(t)
	return p
}

// waitOperUp waits until link in netns is operationally up: the kernel
// attaches a new veth's queueing discipline only then (from its link
// watch, which may lag on a busy machine), and drops what is sent
// before. Without it the first probe right after a fast apply
// (nftables' few milliseconds) could find a pod not yet reachable.
func waitOperUp(t testing.TB, netns ns.NetNS, link string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var state netlink.LinkOperState
		err := netns.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName(link)
			if err == nil {
				state = l.Attrs().OperState
			}
			return err
		})
		if err != nil {
			t.Fatalf("%s: %v", link, err)
		}
		if state == netlink.OperUp {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is %v after 10 s, want up", link, state)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// serve starts, in the pod's namespace, TCP servers on tcpPortA and
// tcpPortB that write "ok", and a UDP echo server on udpPort. Sockets keep
// the namespace they were created in, so the goroutines serving them need
// no namespace of their own. They stop in t.Cleanup.
func (p *pod) serve(t testing.TB) {
	var closers []io.Closer
	err := p.netns.Do(func(ns.NetNS) error {
		for _, port := range []int{tcpPortA, tcpPortB} {
			l, err := net.Listen("tcp4", fmt.Sprintf(":%d", port))
			if err != nil {
				return err
			}
			closers = append(closers, l)
			go func() {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					_, _ = c.Write([]byte("ok"))
					_ = c.Close()
				}
			}()
		}
		u, err := net.ListenPacket("udp4", fmt.Sprintf(":%d", udpPort))
		if err != nil {
			return err
		}
		closers = append(closers, u)
		go func() {
			buf := make([]byte, 1500)
			for {
				n, from, err := u.ReadFrom(buf)
				if err != nil {
					return
				}
				_, _ = u.WriteTo(buf[:n], from)
			}
		}()
		return nil
	})
	t.Cleanup(func() {
		for _, c := range closers {
			_ = c.Close()
		}
	})
	if err != nil {
		t.Fatalf("starting servers in %s: %v", p.name, err)
	}
}

// tcp reports whether a TCP connection from p to dst:port gets the
// server's answer.
func (p *pod) tcp(dst *pod, port int) bool {
	ok := false
	_ = p.netns.Do(func(ns.NetNS) error {
		d := net.Dialer{Timeout: timeout}
		c, err := d.Dial("tcp4", net.JoinHostPort(dst.ip.String(), fmt.Sprint(port)))
		if err != nil {
			return nil
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(timeout))
		buf := make([]byte, 2)
		_, err = io.ReadFull(c, buf)
		ok = err == nil && string(buf) == "ok"
		return nil
	})
	return ok
}

// udp reports whether a datagram from p to dst's echo server comes back.
func (p *pod) udp(dst *pod) bool { return udpOK(p.netns, dst.ip.String(), udpPort) }

// ping reports whether an ICMP echo request from p to dst is answered.
func (p *pod) ping(dst *pod, seq uint16) bool {
	return netnstest.Ping(p.netns, dst.ip.String(), int(seq), timeout) == nil
}
