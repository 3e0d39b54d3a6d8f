//go:build privileged && integration

package crossnode

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/node/registration"
)

const poolCIDR = "10.70.0.0/16"

// lab is a 3-node cluster with felix running, nodes registered and one
// pod per node.
type lab struct {
	*multinode.Cluster
	pods  []*multinode.Pod
	felix []*multinode.Felix
}

// newLab builds the cluster: nodes registered through node/registration
// (interface=eth0), a pool with the given options, tunnel addresses
// allocated, felix started, one pod per node serving "whoami" on 8080.
func newLab(t *testing.T, subnetOf func(int) int, pool multinode.PoolOptions) *lab {
	t.Helper()
	return newLabTB(t, subnetOf, pool)
}

func newLabTB(t testing.TB, subnetOf func(int) int, pool multinode.PoolOptions) *lab {
	t.Helper()
	return newLabWith(t, multinode.Options{Nodes: 3, SubnetOf: subnetOf}, map[string]multinode.PoolOptions{poolCIDR: pool})
}

const poolCIDRv6 = "fd00:70::/48"

// newLabWith is newLab with cluster options and pools by CIDR (the first
// IPv4 one is named "pool", an IPv6 one "pool6").
func newLabWith(t testing.TB, o multinode.Options, pools map[string]multinode.PoolOptions) *lab {
	t.Helper()
	return newLabThen(t, o, pools, nil, nil)
}

// newLabThen is newLabWith with beforeFelix, run once the nodes are
// registered and before any felix starts (to shape the Node resources),
// and felixOpts giving node i's felix its options (nil: the defaults).
func newLabThen(t testing.TB, o multinode.Options, pools map[string]multinode.PoolOptions,
	beforeFelix func(*multinode.Cluster), felixOpts func(i int) multinode.FelixOptions) *lab {
	t.Helper()
	o.NoNodeResources = true
	c := multinode.New(t, o)
	l := &lab{Cluster: c}
	for cidr, p := range pools {
		name := "pool"
		if strings.Contains(cidr, ":") {
			name = "pool6"
		}
		c.CreatePool(name, cidr, p)
	}
	ctx := context.Background()
	alloc := ipam.New(c.Client, ipam.Config{})
	for _, n := range c.Nodes {
		env, err := registration.NetlinkEnv(n.NL)
		if err != nil {
			t.Fatal(err)
		}
		rc := registration.Config{NodeName: n.Name, IPv4Method: "interface=eth0"}
		if o.IPv6 {
			rc.IPv6, rc.IPv6Method = "autodetect", "interface=eth0"
		}
		if _, err := registration.Register(ctx, c.Client, rc, env); err != nil {
			t.Fatal(err)
		}
		if err := registration.EnsureTunnelAddrs(ctx, c.Client, alloc, n.Name, registration.TunnelOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if beforeFelix != nil {
		beforeFelix(c)
	}
	for i, n := range c.Nodes {
		var fo multinode.FelixOptions
		if felixOpts != nil {
			fo = felixOpts(i)
		}
		l.felix = append(l.felix, n.StartFelixWith(fo))
	}
	// Until a felix's first dataplane sync, routes already carry packets
	// that no iptables rule filters yet (the real felix is not ready then).
	for i, f := range l.felix {
		eventually(t, fmt.Sprintf("felix on node%d: first dataplane sync", i), func() string {
			if f.Dataplane.InSync() {
				return ""
			}
			return "not in sync yet"
		})
	}
	for _, n := range c.Nodes {
		p := n.AddPod("pod")
		serveWhoami(t, p.NetNS, net.JoinHostPort(p.IP.String(), "8080"))
		if p.IP6.IsValid() {
			serveWhoami(t, p.NetNS, net.JoinHostPort(p.IP6.String(), "8080"))
		}
		l.pods = append(l.pods, p)
	}
	return l
}

// serveWhoami answers each TCP connection with the source address it
// came from.
func serveWhoami(t testing.TB, n ns.NetNS, addr string) {
	t.Helper()
	var ln net.Listener
	if err := n.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			host, _, _ := net.SplitHostPort(c.RemoteAddr().String())
			_, _ = c.Write([]byte(host))
			c.Close()
		}
	}()
}

// whoami connects from n to addr and returns the source address the
// server saw.
func whoami(n ns.NetNS, addr string) (string, error) {
	return netnstest.DialTCPWithin(n, addr, 2*time.Second)
}

// eventually retries f (which returns "" when satisfied, else why not)
// for up to 20s.
func eventually(t testing.TB, what string, f func() string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		why := f()
		if why == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within 20s: %s: %s", what, why)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// podToPod checks TCP (the server sees the client pod's own address: no
// masquerade) and ICMP from pod i to pod j.
func (l *lab) podToPod(i, j int) string {
	from, to := l.pods[i], l.pods[j]
	got, err := whoami(from.NetNS, net.JoinHostPort(to.IP.String(), "8080"))
	if err != nil {
		return fmt.Sprintf("TCP %s -> %s: %v", from.IP, to.IP, err)
	}
	if got != from.IP.String() {
		return fmt.Sprintf("TCP %s -> %s seen from %s, want the pod's own address", from.IP, to.IP, got)
	}
	if err := netnstest.Ping(from.NetNS, to.IP.String(), 7, 2*time.Second); err != nil {
		return fmt.Sprintf("ICMP %s -> %s: %v", from.IP, to.IP, err)
	}
	return ""
}

// podToPod6 is podToPod over IPv6.
func (l *lab) podToPod6(i, j int) string {
	from, to := l.pods[i], l.pods[j]
	got, err := whoami(from.NetNS, net.JoinHostPort(to.IP6.String(), "8080"))
	if err != nil {
		return fmt.Sprintf("TCP %s -> %s: %v", from.IP6, to.IP6, err)
	}
	if got != from.IP6.String() {
		return fmt.Sprintf("TCP %s -> %s seen from %s, want the pod's own address", from.IP6, to.IP6, got)
	}
	if err := netnstest.Ping(from.NetNS, to.IP6.String(), 8, 2*time.Second); err != nil {
		return fmt.Sprintf("ICMPv6 %s -> %s: %v", from.IP6, to.IP6, err)
	}
	return ""
}

func (l *lab) allPodToPod(t *testing.T) {
	t.Helper()
	for i := range l.pods {
		for j := range l.pods {
			if i != j {
				eventually(t, fmt.Sprintf("pod on node%d -> pod on node%d", i, j), func() string { return l.podToPod(i, j) })
			}
		}
	}
}

// txPackets is the TX packet count of a node's interface.
func txPackets(t *testing.T, n *multinode.Node, iface string) uint64 {
	t.Helper()
	l, err := n.NL.LinkByName(iface)
	if err != nil {
		t.Fatalf("%s on %s: %v", iface, n.Name, err)
	}
	return l.Attrs().Statistics.TxPackets
}

// blockOf is the /26 block of a pod's address.
func blockOf(ip netip.Addr) string { return ipam.BlockFor(ip, 26).String() }

func routeTable(t *testing.T, n *multinode.Node) string {
	t.Helper()
	out, err := n.IP("-4", "route", "show")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func hasLine(out, prefix string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return true
		}
	}
	return false
}
