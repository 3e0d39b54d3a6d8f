package netnstest

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// ServeTCP listens on addr inside n (the socket belongs to n from then on)
// and answers every connection with reply, until the test ends. It returns
// the address to dial (addr with the port filled in).
func ServeTCP(t testing.TB, n ns.NetNS, addr, reply string) string {
	t.Helper()
	ln, err := ListenTCP(n, addr, reply)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// ListenTCP is ServeTCP for programs that are not tests: the caller closes
// the listener.
func ListenTCP(n ns.NetNS, addr, reply string) (net.Listener, error) {
	var ln net.Listener
	if err := n.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return nil, err
	}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(reply))
			c.Close()
		}
	}()
	return ln, nil
}

// DialTCP connects from inside n to addr and returns what the server says.
func DialTCP(n ns.NetNS, addr string) (string, error) { return DialTCPWithin(n, addr, 3*time.Second) }

// DialTCPWithin is DialTCP giving up after d (connecting, then reading).
func DialTCPWithin(n ns.NetNS, addr string, d time.Duration) (string, error) {
	var got []byte
	err := n.Do(func(ns.NetNS) error {
		c, err := net.DialTimeout("tcp", addr, d)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(d))
		got, err = io.ReadAll(c)
		return err
	})
	return string(got), err
}
