package netnstest

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// Ping sends one ICMP (or ICMPv6) echo request from inside n to dst and
// waits up to timeout for the matching reply, over a raw socket (the test
// hosts have no ping binary). seq tells concurrent pings apart.
func Ping(n ns.NetNS, dst string, seq int, timeout time.Duration) error {
	ip := net.ParseIP(dst)
	if ip == nil {
		return fmt.Errorf("ping: %q is not an IP address", dst)
	}
	network, proto, echo, reply := "ip4:icmp", 1, icmp.Type(ipv4.ICMPTypeEcho), icmp.Type(ipv4.ICMPTypeEchoReply)
	if ip.To4() == nil {
		network, proto, echo, reply = "ip6:ipv6-icmp", 58, ipv6.ICMPTypeEchoRequest, ipv6.ICMPTypeEchoReply
	}
	id := os.Getpid() & 0xffff
	return n.Do(func(ns.NetNS) error {
		c, err := icmp.ListenPacket(network, "")
		if err != nil {
			return fmt.Errorf("ping %s: %w", dst, err)
		}
		defer c.Close()
		// ICMPv6 checksums need the addresses: the kernel fills them in
		// for raw ICMPv6 sockets, so Marshal leaves them zero there.
		msg, err := (&icmp.Message{Type: echo, Body: &icmp.Echo{ID: id, Seq: seq, Data: []byte("tabby")}}).Marshal(nil)
		if err != nil {
			return err
		}
		if _, err := c.WriteTo(msg, &net.IPAddr{IP: ip}); err != nil {
			return fmt.Errorf("ping %s: %w", dst, err)
		}
		deadline := time.Now().Add(timeout)
		_ = c.SetReadDeadline(deadline)
		buf := make([]byte, 1500)
		for {
			k, from, err := c.ReadFrom(buf)
			if err != nil {
				return fmt.Errorf("ping %s: no reply within %v: %w", dst, timeout, err)
			}
			m, err := icmp.ParseMessage(proto, buf[:k])
			if err != nil || m.Type != reply || !from.(*net.IPAddr).IP.Equal(ip) {
				continue // someone else's traffic
			}
			if e, ok := m.Body.(*icmp.Echo); ok && e.ID == id && e.Seq == seq {
				return nil
			}
		}
	})
}
