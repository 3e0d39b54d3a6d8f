//go:build privileged && integration

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testservers"
)

const streamPort = 8090

// TestPrivilegedNftablesLiveSwitch runs the real felix (restarted on a
// configuration change as calico-node restarts it) with a policy in place
// and a TCP stream between two pods, and switches nftablesMode Disabled
// -> Enabled -> Disabled through the FelixConfiguration. After each
// switch the policy is enforced by the new mode alone (nothing of the
// other left: no cali- chain or ipset in nftables mode, no calico table
// in iptables mode), and the stream never stops.
func TestPrivilegedNftablesLiveSwitch(t *testing.T) {
	e := testservers.StartEtcd(t)
	c := etcdClient(t, e)
	ctx := context.Background()
	putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{NFTablesMode: new(v3.NFTablesModeDisabled)})
	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	db := newPod(t, nodeNS, "db", "calibbbb", "10.65.0.2")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")
	for _, r := range []v3.Resource{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "web", node, web.iface, web.ip.String(), map[string]string{"app": "web"}),
		ct.WEP("prod", "db", node, db.iface, db.ip.String(), map[string]string{"app": "db"}),
		ct.WEP("dev", "client", node, client.iface, client.ip.String(), map[string]string{"app": "client"}),
		ct.GNP("web-from-client", "default", ct.Ptr(10.0), "app == 'web'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Source: v3.EntityRule{Selector: "app == 'client'"}},
		}, nil),
	} {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	f := startRealFelixWith(t, e.Endpoint(), nodeNS, nil, true)
	mode := func(m v3.NFTablesMode) string {
		ipt := nsRun(t, nodeNS, "iptables-save")
		nft := nsRun(t, nodeNS, "nft", "list", "ruleset")
		sets := nsRun(t, nodeNS, "ipset", "list", "-n")
		enforced := client.tcp(web, tcpPortA) && !db.tcp(web, tcpPortA)
		switch {
		case !f.ready():
			return "felix not ready"
		case !enforced:
			return "policy not enforced"
		case m == v3.NFTablesModeEnabled && (strings.Contains(ipt, "cali-") || strings.Contains(sets, "cali")):
			return "iptables rules or ipsets left in nftables mode:\n" + ipt + sets
		case m == v3.NFTablesModeEnabled && !strings.Contains(nft, "chain filter-cali-FORWARD"):
			return "no nftables rules:\n" + nft
		case m == v3.NFTablesModeDisabled && strings.Contains(nft, "table ip calico"):
			return "nftables table left in iptables mode:\n" + nft
		case m == v3.NFTablesModeDisabled && !strings.Contains(ipt, ":cali-FORWARD"):
			return "no iptables rules:\n" + ipt
		}
		return ""
	}
	waitMode := func(m v3.NFTablesMode) {
		t.Helper()
		var why string
		eventually(t, 60*time.Second, "felix in mode "+string(m), func() bool { why = mode(m); return why == "" })
		if why != "" {
			t.Fatalf("mode %s: %s\n%s", m, why, f.logs.String())
		}
	}
	waitMode(v3.NFTablesModeDisabled)
	s := startStream(t, client, web)
	for i, m := range []v3.NFTablesMode{v3.NFTablesModeEnabled, v3.NFTablesModeDisabled} {
		before := s.count()
		putFelixConfig(t, c, "default", v3.FelixConfigurationSpec{NFTablesMode: new(m)})
		eventually(t, 30*time.Second, "felix restarted", func() bool { return int(f.restarts.Load()) == i+1 })
		waitMode(m)
		if err := s.err(); err != nil {
			t.Fatalf("the stream broke switching to %s: %v", m, err)
		}
		eventually(t, 5*time.Second, "the stream goes on", func() bool { return s.count() > before+10 })
	}
	if f.restarts.Load() != 2 {
		t.Errorf("felix restarted %d times, want 2", f.restarts.Load())
	}
	s.stop()
	if err := s.err(); err != nil {
		t.Fatalf("the stream broke: %v", err)
	}
	t.Logf("%d round trips on one connection through both switches", s.count())
}

// stream is one TCP connection from one pod to another carrying a
// round trip every 20 ms until stopped; any failure ends it.
type stream struct {
	mu     sync.Mutex
	n      int
	failed error
	done   chan struct{}
	wg     sync.WaitGroup
}

func (s *stream) count() int   { s.mu.Lock(); defer s.mu.Unlock(); return s.n }
func (s *stream) err() error   { s.mu.Lock(); defer s.mu.Unlock(); return s.failed }
func (s *stream) stop()        { close(s.done); s.wg.Wait() }
func (s *stream) fail(e error) { s.mu.Lock(); s.failed = e; s.mu.Unlock() }

// startStream serves an echo on dst's streamPort and starts the stream
// from src.
func startStream(t *testing.T, src, dst *pod) *stream {
	t.Helper()
	var l net.Listener
	if err := dst.netns.Do(func(ns.NetNS) (err error) {
		l, err = net.Listen("tcp4", fmt.Sprintf(":%d", streamPort))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					if _, err := conn.Write([]byte(line)); err != nil {
						return
					}
				}
			}()
		}
	}()
	var conn net.Conn
	if err := src.netns.Do(func(ns.NetNS) (err error) {
		conn, err = net.DialTimeout("tcp4", fmt.Sprintf("%s:%d", dst.ip, streamPort), 3*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	s := &stream{done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer conn.Close()
		r := bufio.NewReader(conn)
		for i := 0; ; i++ {
			select {
			case <-s.done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_ = conn.SetDeadline(time.Now().Add(3 * time.Second))
			msg := fmt.Sprintf("%d\n", i)
			if _, err := conn.Write([]byte(msg)); err != nil {
				s.fail(fmt.Errorf("round trip %d: %w", i, err))
				return
			}
			got, err := r.ReadString('\n')
			if err != nil || got != msg {
				s.fail(fmt.Errorf("round trip %d: got %q, %v", i, got, err))
				return
			}
			s.mu.Lock()
			s.n++
			s.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		select {
		case <-s.done:
		default:
			s.stop()
		}
	})
	return s
}
