//go:build privileged && integration

package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/multinode"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/node/registration"
)

// BenchmarkPrivilegedFlowLogsTwoNodes (make bench-flowlogs-two-nodes)
// measures TCP throughput between pods of two nodes (internal/multinode:
// two node namespaces on one underlay subnet, each running the real
// felix, agent.Run, over one etcd; pods wired by the calico CNI plugin; a
// CrossSubnet pool, so felix's route manager routes the pods' blocks
// straight over the underlay) with flow logs off and on: the default
// FelixConfiguration's flowLogsLocalReporter switched between rounds
// (felix restarts to apply it, as Calico's does), 4 streams, 3 s rounds
// in ABBA order, medians printed. A security tier passing everything and
// a policy allowing the traffic give each connection a path of NFLOG
// verdicts on both nodes.
func BenchmarkPrivilegedFlowLogsTwoNodes(b *testing.B) {
	c := multinode.New(b, multinode.Options{Nodes: 2, NoNodeResources: true})
	c.CreatePool("pool", "10.72.0.0/16", multinode.PoolOptions{VXLAN: v3.VXLANModeCrossSubnet, IPIP: v3.IPIPModeNever, BlockSize: 26})
	ctx := context.Background()
	alloc := ipam.New(c.Client, ipam.Config{})
	for _, n := range c.Nodes {
		env, err := registration.NetlinkEnv(n.NL)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := registration.Register(ctx, c.Client, registration.Config{NodeName: n.Name, IPv4Method: "interface=eth0"}, env); err != nil {
			b.Fatal(err)
		}
		if err := registration.EnsureTunnelAddrs(ctx, c.Client, alloc, n.Name, registration.TunnelOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range []v3.Resource{
		ct.Tier("security", 100, v3.Deny),
		ct.GNP("security.pass", "security", nil, "all()", ct.Both, []v3.Rule{{Action: v3.Pass}}, []v3.Rule{{Action: v3.Pass}}),
		ct.GNP("allow-tcp", "default", nil, "all()", ct.Both, []v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP")}},
			[]v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP")}}),
	} {
		c.Create(r)
	}
	setFlowLogs := func(on bool) {
		reporter := map[bool]string{true: "Enabled", false: "Disabled"}[on]
		putFelixConfig(b, c.Client, "default", v3.FelixConfigurationSpec{FlowLogsLocalReporter: &reporter,
			FlowLogsFlushInterval: &metav1.Duration{Duration: 5 * time.Second}})
	}
	setFlowLogs(false)
	var felixes []*realFelix
	for _, n := range c.Nodes {
		f := startRealFelixWith(b, c.Etcd.Endpoint(), n, map[string]string{"FELIX_FELIXHOSTNAME": n.Name,
			"TABBY_FELIX_FLOW_SOCKET_DIR": b.TempDir(), "FELIX_ENDPOINTSTATUSPATHPREFIX": n.StatusPrefix}, true)
		felixes = append(felixes, f)
	}
	// nflogRules is the number of NFLOG rules in node i's filter table.
	nflogRules := func(i int) int {
		out, err := c.Nodes[i].Exec("iptables-save", "-t", "filter")
		if err != nil {
			b.Fatal(err)
		}
		return strings.Count(out, "-j NFLOG")
	}
	// applied waits until both felixes are ready with flow logs as asked.
	applied := func(on bool) {
		deadline := time.Now().Add(90 * time.Second)
		for i, f := range felixes {
			for !f.ready() || (nflogRules(i) > 0) != on {
				if time.Now().After(deadline) {
					b.Fatalf("node%d: felix ready=%v with %d NFLOG rules 90 s after flow logs on=%v; its log:\n%s", i, f.ready(), nflogRules(i), on, f.logs)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
	}
	applied(false)
	client, server := c.Nodes[0].AddPod("client"), c.Nodes[1].AddPod("server")
	addr := net.JoinHostPort(server.IP.String(), "5000")
	sink(b, server, addr)
	// The first connection waits for the routes and the pods' chains.
	deadline := time.Now().Add(60 * time.Second)
	for {
		conn, err := dialFrom(client, addr, time.Second)
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%s never reachable from node0's pod: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	var off, on []float64
	for round := range 4 {
		for _, flowLogs := range [][]bool{{false, true}, {true, false}}[round%2] {
			setFlowLogs(flowLogs)
			applied(flowLogs)
			tp := streams(b, client, addr, 4, 3*time.Second)
			if flowLogs {
				on = append(on, tp)
			} else {
				off = append(off, tp)
			}
		}
	}
	medOff, medOn := median(off), median(on)
	fmt.Printf("TCP throughput between pods on two nodes (real felix on each), 4 streams, 3 s x 4 rounds each (ABBA): flow logs off %.2f Gbit/s (%v), on %.2f Gbit/s (%v): %.1f%%\n",
		medOff, round2(off), medOn, round2(on), (medOn-medOff)/medOff*100)
	b.ReportMetric(medOff, "Gbit/s-off")
	b.ReportMetric(medOn, "Gbit/s-on")
}

// sink reads and discards every connection to addr in pod p.
func sink(b *testing.B, p *multinode.Pod, addr string) {
	var l net.Listener
	if err := p.Do(func(ns.NetNS) (err error) { l, err = net.Listen("tcp4", addr); return err }); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); c.Close() }()
		}
	}()
}

// dialFrom connects from pod p.
func dialFrom(p *multinode.Pod, addr string, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := p.Do(func(ns.NetNS) error {
		var err error
		c, err = net.DialTimeout("tcp4", addr, timeout)
		return err
	})
	return c, err
}

// streams sends to addr from pod p over n connections for d and returns
// Gbit/s.
func streams(b *testing.B, p *multinode.Pod, addr string, n int, d time.Duration) float64 {
	var total atomic.Int64
	deadline := time.Now().Add(d)
	done := make(chan struct{})
	for range n {
		go func() {
			defer func() { done <- struct{}{} }()
			c, err := dialFrom(p, addr, 5*time.Second)
			if err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 256<<10)
			for time.Now().Before(deadline) {
				k, err := c.Write(buf)
				total.Add(int64(k))
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for range n {
		<-done
	}
	return float64(total.Load()) * 8 / d.Seconds() / 1e9
}
