//go:build privileged

package netnstest

import (
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// TestPrivilegedVethTraffic proves the test plumbing works on this machine:
// two fresh namespaces joined by a veth pair carry a real TCP connection.
func TestPrivilegedVethTraffic(t *testing.T) {
	a, b := New(t), New(t)
	const aName, bName = "tveth-a", "tveth-b"

	err := a.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: aName}, PeerName: bName}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("adding veth: %w", err)
		}
		peer, err := netlink.LinkByName(bName)
		if err != nil {
			return err
		}
		return netlink.LinkSetNsFd(peer, int(b.Fd()))
	})
	if err != nil {
		t.Fatal(err)
	}
	setup := func(n ns.NetNS, link, cidr string) {
		t.Helper()
		err := n.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName(link)
			if err != nil {
				return err
			}
			addr, err := netlink.ParseAddr(cidr)
			if err != nil {
				return err
			}
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
			if err := netlink.LinkSetUp(l); err != nil {
				return err
			}
			lo, err := netlink.LinkByName("lo")
			if err != nil {
				return err
			}
			return netlink.LinkSetUp(lo)
		})
		if err != nil {
			t.Fatalf("configuring %s: %v", link, err)
		}
	}
	setup(a, aName, "192.0.2.1/24")
	setup(b, bName, "192.0.2.2/24")

	var ln net.Listener
	if err := a.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", "192.0.2.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = c.Write([]byte("tabby"))
		_ = c.Close()
	}()

	var got []byte
	err = b.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		got, err = io.ReadAll(c)
		return err
	})
	if err != nil {
		t.Fatalf("connecting across the veth: %v", err)
	}
	if string(got) != "tabby" {
		t.Fatalf("got %q over the veth, want %q", got, "tabby")
	}
}

// TestPrivilegedPing: Ping gets an answer across a veth pair and reports
// an address nobody answers for.
func TestPrivilegedPing(t *testing.T) {
	a, b := New(t), New(t)
	err := a.Do(func(ns.NetNS) error {
		veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "tping-a"}, PeerName: "tping-b", PeerNamespace: netlink.NsFd(int(b.Fd()))}
		return netlink.LinkAdd(veth)
	})
	if err != nil {
		t.Fatal(err)
	}
	for n, link := range map[ns.NetNS]string{a: "tping-a", b: "tping-b"} {
		cidr := map[string]string{"tping-a": "192.0.2.1/24", "tping-b": "192.0.2.2/24"}[link]
		if err := n.Do(func(ns.NetNS) error {
			l, err := netlink.LinkByName(link)
			if err != nil {
				return err
			}
			addr, _ := netlink.ParseAddr(cidr)
			if err := netlink.AddrAdd(l, addr); err != nil {
				return err
			}
			return netlink.LinkSetUp(l)
		}); err != nil {
			t.Fatal(err)
		}
	}
	if err := Ping(b, "192.0.2.1", 1, 5*time.Second); err != nil {
		t.Errorf("ping across the veth: %v", err)
	}
	if err := Ping(b, "192.0.2.99", 2, 500*time.Millisecond); err == nil {
		t.Error("a ping to an address nobody has was answered")
	}
}
