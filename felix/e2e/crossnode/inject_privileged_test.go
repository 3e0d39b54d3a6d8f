//go:build privileged && integration

package crossnode

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
)

// vxlanFrame builds a VXLAN (VNI 4096) packet carrying an Ethernet frame
// to dstMAC with an IPv4/UDP packet src -> dst:dport holding payload.
func vxlanFrame(dstMAC net.HardwareAddr, src, dst netip.Addr, dport uint16, payload string) []byte {
	udp := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(udp[0:], 5555)
	binary.BigEndian.PutUint16(udp[2:], dport)
	binary.BigEndian.PutUint16(udp[4:], uint16(len(udp)))
	copy(udp[8:], payload)
	ip := make([]byte, 20)
	ip[0], ip[8], ip[9] = 0x45, 64, 17
	binary.BigEndian.PutUint16(ip[2:], uint16(20+len(udp)))
	binary.BigEndian.PutUint16(ip[6:], 0x4000)
	s4, d4 := src.As4(), dst.As4()
	copy(ip[12:], s4[:])
	copy(ip[16:], d4[:])
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(binary.BigEndian.Uint16(ip[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
	eth := append(append(append([]byte{}, dstMAC...), 0x02, 0, 0, 0, 0, 0x99), 0x08, 0x00)
	vx := []byte{0x08, 0, 0, 0, 0x00, 0x10, 0x00, 0}
	return append(append(append(vx, eth...), ip...), udp...)
}

// TestPrivilegedVXLANFromUnknownHostDropped: a VXLAN packet addressed to
// node0 that carries a UDP datagram for node0's pod is delivered when a
// known node (node1) sends it, and dropped by cali-INPUT when the
// external namespace (not a node) sends the very same bytes.
func TestPrivilegedVXLANFromUnknownHostDropped(t *testing.T) {
	l := newLab(t, nil, multinode.PoolOptions{VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever})
	l.allPodToPod(t)
	r, err := l.Client.Get(context.Background(), datastore.Key{Kind: v3.KindNode, Name: l.Nodes[0].Name})
	if err != nil {
		t.Fatal(err)
	}
	mac, err := net.ParseMAC(r.(*v3.Node).Spec.VXLANTunnelMACAddr)
	if err != nil {
		t.Fatal(err)
	}
	target := l.pods[0]
	var conn net.PacketConn
	if err := target.Do(func(ns.NetNS) error {
		var err error
		conn, err = net.ListenPacket("udp4", net.JoinHostPort(target.IP.String(), "9999"))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	received := func() string {
		_ = conn.SetReadDeadline(time.Now().Add(time.Second))
		buf := make([]byte, 100)
		n, _, err := conn.ReadFrom(buf)
		if err != nil {
			return ""
		}
		return string(buf[:n])
	}
	send := func(from ns.NetNS, payload string) {
		t.Helper()
		frame := vxlanFrame(mac, l.pods[1].IP, target.IP, 9999, payload)
		if err := from.Do(func(ns.NetNS) error {
			c, err := net.Dial("udp4", net.JoinHostPort(l.Nodes[0].Addr.Addr().String(), "4789"))
			if err != nil {
				return err
			}
			defer c.Close()
			_, err = c.Write(frame)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	send(l.Nodes[1].NetNS, "from-node1")
	if got := received(); got != "from-node1" {
		t.Fatalf("the control packet from node1 was not delivered (%q): the crafted frame is wrong", got)
	}
	send(l.External.NetNS, "from-external")
	if got := received(); got != "" {
		t.Errorf("a VXLAN packet from a non-node host reached the pod: %q", got)
	}
	rules, err := l.Nodes[0].Exec("iptables-save", "-t", "filter")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rules, "--match-set cali40all-vxlan-net src -m addrtype --dst-type LOCAL") {
		t.Errorf("cali-INPUT lacks the VXLAN allow rule:\n%s", rules)
	}
}
