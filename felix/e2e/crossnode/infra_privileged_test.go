//go:build privileged && integration

package crossnode

import (
	"context"
	"fmt"
	"github.com/tabbynet/tabby/internal/testlog"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/internal/netnstest"
)

// setNodeBGP rewrites a Node's BGP addresses with f.
func setNodeBGP(t testing.TB, c *multinode.Cluster, name string, f func(*v3.NodeBGPSpec) *v3.NodeBGPSpec) {
	t.Helper()
	ctx := context.Background()
	o, err := c.Client.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	n := o.(*v3.Node).DeepCopy()
	n.Spec.BGP = f(n.Spec.BGP)
	if _, err := c.Client.Update(ctx, n); err != nil {
		t.Fatal(err)
	}
}

// ipsetHas says whether the node's ipset holds addr (its `ipset list`
// output, for the failure message, when not).
func ipsetHas(n *multinode.Node, set, addr string) (bool, string) {
	out, err := n.Exec("ipset", "list", set)
	if err != nil {
		return false, fmt.Sprintf("ipset list %s: %v: %s", set, err, out)
	}
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) == addr || strings.HasPrefix(strings.TrimSpace(l), addr+" ") {
			return true, ""
		}
	}
	return false, out
}

// TestPrivilegedCrossNodeBareIPAddress: node1's Node carries its BGP
// address as a bare IP ("172.30.1.11", no prefix length: Calico's API
// accepts it), VXLAN Always. Every node's all-vxlan set (the VXLAN
// senders cali-INPUT accepts) holds node1's address, and pods on the
// other nodes reach node1's pods and node1's reach theirs (real TCP and
// ICMP through vxlan.calico). (Before the one reading of nodes, felix
// routed to node1 but left it out of that set, so node1's VXLAN packets
// were dropped on arrival.)
func TestPrivilegedCrossNodeBareIPAddress(t *testing.T) {
	l := newLabThen(t, multinode.Options{Nodes: 3}, map[string]multinode.PoolOptions{poolCIDR: {VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever}},
		func(c *multinode.Cluster) {
			setNodeBGP(t, c, c.Nodes[1].Name, func(b *v3.NodeBGPSpec) *v3.NodeBGPSpec {
				b.IPv4Address = c.Nodes[1].Addr.Addr().String()
				return b
			})
		}, nil)
	bare := l.Nodes[1].Addr.Addr().String()
	for i, n := range l.Nodes {
		// The VXLAN hosts' set (cali40all-hosts-net, the IPIP senders',
		// exists only with an IPIP pool, which this kernel cannot carry).
		for _, set := range []string{"cali40all-vxlan-net"} {
			eventually(t, fmt.Sprintf("node%d's %s holds node1's bare address %s", i, set, bare), func() string {
				if ok, out := ipsetHas(n, set, bare); !ok {
					return out
				}
				return ""
			})
		}
	}
	l.allPodToPod(t)
}

// TestPrivilegedNodeWithoutAddressKeepsLocalRoutes: node0's Node has no
// address (as with a policy-only set-up, or before calico-node's
// registration wrote it). Its felix, with a 2 s workload route grace and
// a 1 s route resync, keeps every local pod's route (and their traffic:
// pod to pod on node0, TCP and ICMP) well past the grace period, and
// reports the missing address: felix_route_node_address_missing is 1 and
// the log says so, once. When the address comes, node0's pods reach the
// other nodes' pods.
func TestPrivilegedNodeWithoutAddressKeepsLocalRoutes(t *testing.T) {
	const grace = 2 * time.Second
	reg := prometheus.NewRegistry()
	var logs testlog.Buffer
	l := newLabThen(t, multinode.Options{Nodes: 2}, map[string]multinode.PoolOptions{poolCIDR: {VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever}},
		func(c *multinode.Cluster) {
			setNodeBGP(t, c, c.Nodes[0].Name, func(*v3.NodeBGPSpec) *v3.NodeBGPSpec { return nil })
		}, func(i int) multinode.FelixOptions {
			if i != 0 {
				return multinode.FelixOptions{}
			}
			return multinode.FelixOptions{WorkloadRouteGrace: grace, RouteRefresh: time.Second, Registry: reg,
				Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
		})
	n0 := l.Nodes[0]
	second := n0.AddPod("second")
	serveWhoami(t, second.NetNS, net.JoinHostPort(second.IP.String(), "8080"))
	local := []*multinode.Pod{l.pods[0], second}
	localTraffic := func() string {
		for _, p := range [][2]*multinode.Pod{{local[0], local[1]}, {local[1], local[0]}} {
			from, to := p[0], p[1]
			got, err := whoami(from.NetNS, net.JoinHostPort(to.IP.String(), "8080"))
			if err != nil || got != from.IP.String() {
				return fmt.Sprintf("TCP %s -> %s: %q %v", from.IP, to.IP, got, err)
			}
			if err := netnstest.Ping(from.NetNS, to.IP.String(), 9, 2*time.Second); err != nil {
				return fmt.Sprintf("ICMP %s -> %s: %v", from.IP, to.IP, err)
			}
		}
		return ""
	}
	routesPresent := func() string {
		r := routeTable(t, n0)
		for _, p := range local {
			if !hasLine(r, p.IP.String()+" dev cali") {
				return fmt.Sprintf("no route to local pod %s:\n%s", p.IP, r)
			}
		}
		return ""
	}
	eventually(t, "local traffic on node0", localTraffic)
	eventually(t, "felix_route_node_address_missing on node0", func() string {
		if v := testutil.ToFloat64(mustGauge(t, reg, "felix_route_node_address_missing")); v != 1 {
			return fmt.Sprintf("%v, want 1", v)
		}
		return ""
	})
	// Past the grace period several times over, with a resync every second.
	deadline := time.Now().Add(3 * grace)
	for time.Now().Before(deadline) {
		if why := routesPresent(); why != "" {
			t.Fatalf("a local pod lost its route without this node's address: %s\nfelix log:\n%s", why, logs.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if why := localTraffic(); why != "" {
		t.Fatalf("local traffic after the grace period: %s", why)
	}
	log := logs.String()
	if strings.Contains(log, "removing a workload route") {
		t.Errorf("felix removed workload routes:\n%s", log)
	}
	if n := strings.Count(log, "has no address"); n != 1 {
		t.Errorf("the missing address logged %d times, want once:\n%s", n, log)
	}
	setNodeBGP(t, l.Cluster, n0.Name, func(*v3.NodeBGPSpec) *v3.NodeBGPSpec {
		return &v3.NodeBGPSpec{IPv4Address: n0.Addr.String()}
	})
	eventually(t, "node0 -> node1 once node0's address is known", func() string { return l.podToPod(0, 1) + l.podToPod(1, 0) })
	if v := testutil.ToFloat64(mustGauge(t, reg, "felix_route_node_address_missing")); v != 0 {
		t.Errorf("felix_route_node_address_missing = %v with the address, want 0", v)
	}
}

// mustGauge finds a registered gauge by name.
func mustGauge(t testing.TB, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name && len(mf.GetMetric()) == 1 {
			return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: name},
				func() float64 { return mf.GetMetric()[0].GetGauge().GetValue() })
		}
	}
	t.Fatalf("metric %s not registered", name)
	return nil
}
