//go:build privileged && integration

package crossnode

import (
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/internal/multinode"
)

// TestPrivilegedSpoofedSourceDropped: a pod sending with another pod's
// address as its source is stopped by the reverse-path check on its node
// (raw table), while its own address still gets through to the same
// remote listener.
func TestPrivilegedSpoofedSourceDropped(t *testing.T) {
	l := newLab(t, nil, multinode.PoolOptions{VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever})
	l.allPodToPod(t)
	spoofer, victim, target := l.pods[0], l.pods[1], l.pods[2]
	var conn net.PacketConn
	if err := target.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.ListenPacket("udp4", net.JoinHostPort(target.IP.String(), "9998"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	read := func() (string, string) {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 64)
		n, from, err := conn.ReadFrom(buf)
		if err != nil {
			return "", ""
		}
		host, _, _ := net.SplitHostPort(from.String())
		return string(buf[:n]), host
	}
	send := func(src net.IP, payload string) {
		t.Helper()
		if err := spoofer.Do(func(ns.NetNS) error {
			c, err := net.DialUDP("udp4", &net.UDPAddr{IP: src}, &net.UDPAddr{IP: target.IP.AsSlice(), Port: 9998})
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write([]byte(payload))
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	send(spoofer.IP.AsSlice(), "honest")
	if got, from := read(); got != "honest" || from != spoofer.IP.String() {
		t.Fatalf("control datagram from the pod's own address: %q from %s", got, from)
	}
	// The spoofer takes the victim's address as a second address.
	eth0, err := spoofer.NL.LinkByName("eth0")
	if err != nil {
		t.Fatal(err)
	}
	a, _ := netlink.ParseAddr(victim.IP.String() + "/32")
	if err := spoofer.NL.AddrAdd(eth0, a); err != nil {
		t.Fatal(err)
	}
	send(victim.IP.AsSlice(), "spoofed")
	if got, from := read(); got != "" {
		t.Errorf("a datagram with another pod's source address got through: %q from %s", got, from)
	}
}
