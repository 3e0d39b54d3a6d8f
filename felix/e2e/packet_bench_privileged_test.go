//go:build privileged

package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// benchPacketWindow is how long each rate is measured.
const benchPacketWindow = 3 * time.Second

// BenchmarkPrivilegedPacketRate measures the per-packet cost of felix's
// rules: the request/response rate between two pods on one node whose
// rules hold the synthetic cluster (1,000 policies, 500 local and 5,000
// remote endpoints), the server selected by 10 of its policies (its
// ingress allowed by one of them, the client's egress by its profile):
//
//   - rr-per-s: 1-byte requests and replies on one TCP connection (every
//     packet after the handshake is ESTABLISHED: the dispatch to the
//     endpoint's chain and the conntrack check);
//   - crr-per-s: a new connection per request (each SYN walks the
//     policies).
//
// In both dataplane modes (sub-benchmarks iptables and nftables), one
// after the other in one run; under load, compare the two, not the
// absolute rates.
//
// Run: go test -tags privileged -run '^$' -bench PacketRate -benchtime 1x ./felix/e2e/
func BenchmarkPrivilegedPacketRate(b *testing.B) { benchEachMode(b, benchPacketRate) }

func benchPacketRate(b *testing.B, mode string) {
	nodeNS := newNode(b)
	server := newPod(b, nodeNS, "server", "caliserve", "10.65.0.1")
	client := newPod(b, nodeNS, "client", "caliclien", "10.65.0.2")
	objs := append(ct.Synthetic(1000, 500, 5000),
		ct.WEP("ns1", "server", ct.Node, server.iface, server.ip.String(), map[string]string{"app": "a1"}),
		ct.WEP("ns1", "client", ct.Node, client.iface, client.ip.String(), map[string]string{"app": "a2"}))
	res := calc.Compute(ct.Input(ct.Node, objs))
	dp := newModeDataplane(b, mode, nodeNS.Path(), dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4,
		Logger: slog.New(slog.DiscardHandler),
	})
	dp.SetDesired(rules.Render(rules.DefaultConfig(), res, 4))
	if _, err := dp.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	addr := fmt.Sprintf("%s:80", server.ip)
	echo1(b, server.netns)
	for range b.N {
		rr, err := rrRate(client.netns, addr)
		if err != nil {
			b.Fatalf("request/response: %v", err)
		}
		crr, err := crrRate(client.netns, addr)
		if err != nil {
			b.Fatalf("connect/request/response: %v", err)
		}
		b.ReportMetric(rr, "rr-per-s")
		b.ReportMetric(crr, "crr-per-s")
	}
}

// echo1 serves one-byte echoes on port 80 of n until the test ends.
func echo1(b *testing.B, n ns.NetNS) {
	var l net.Listener
	if err := n.Do(func(ns.NetNS) (err error) { l, err = net.Listen("tcp4", ":80"); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				buf := make([]byte, 1)
				for {
					if _, err := io.ReadFull(c, buf); err != nil {
						return
					}
					if _, err := c.Write(buf); err != nil {
						return
					}
				}
			}()
		}
	}()
}

func dialIn(n ns.NetNS, addr string) (c net.Conn, err error) {
	err = n.Do(func(ns.NetNS) error { c, err = net.DialTimeout("tcp4", addr, 2*time.Second); return err })
	return c, err
}

// roundTrip sends one byte and reads its echo.
func roundTrip(c net.Conn, buf []byte) error {
	if _, err := c.Write(buf); err != nil {
		return err
	}
	_, err := io.ReadFull(c, buf)
	return err
}

// rrRate is round trips per second on one connection.
func rrRate(n ns.NetNS, addr string) (float64, error) {
	c, err := dialIn(n, addr)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	buf := []byte{1}
	count, start := 0, time.Now()
	for time.Since(start) < benchPacketWindow {
		if err := roundTrip(c, buf); err != nil {
			return 0, err
		}
		count++
	}
	return float64(count) / time.Since(start).Seconds(), nil
}

// crrRate is connections (each with one round trip) per second.
func crrRate(n ns.NetNS, addr string) (float64, error) {
	buf := []byte{1}
	count, start := 0, time.Now()
	for time.Since(start) < benchPacketWindow {
		c, err := dialIn(n, addr)
		if err != nil {
			return 0, err
		}
		err = roundTrip(c, buf)
		c.Close()
		if err != nil {
			return 0, err
		}
		count++
	}
	return float64(count) / time.Since(start).Seconds(), nil
}
