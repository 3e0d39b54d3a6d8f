//go:build privileged

package e2e

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// flowBench is a node with a client and a server pod, an allowing policy
// in two tiers, and felix's rules applied with or without flow logs.
type flowBench struct {
	node           ns.NetNS
	client, server *pod
	res            *calc.Result
	objs           []any
	dp             *dataplane.Dataplane
	log            *slog.Logger
	stop           func() // stops the collector, when on
	store          *collector.Store
}

const benchPorts = 50 // the server's sink ports (flow keys of the CPU bench)

func newFlowBench(b *testing.B) *flowBench {
	f := &flowBench{node: newNode(b), log: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	f.server = newPod(b, f.node, "server", "caliaaaa", "10.65.0.1")
	f.client = newPod(b, f.node, "client", "calicccc", "10.65.0.3")
	f.objs = []any{
		ct.NSProfile("prod", nil), ct.NSProfile("dev", nil),
		ct.WEP("prod", "server", node, f.server.iface, f.server.ip.String(), map[string]string{"app": "server"}),
		ct.WEP("dev", "client", node, f.client.iface, f.client.ip.String(), map[string]string{"app": "client"}),
		ct.Tier("security", 100, v3.Deny),
		ct.GNP("security.pass", "security", nil, "all()", ct.Both, []v3.Rule{{Action: v3.Pass}}, []v3.Rule{{Action: v3.Pass}}),
		ct.NP("prod", "server", nil, "app == 'server'", ct.Ingress, []v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP"),
			Source: v3.EntityRule{Selector: "app == 'client'", NamespaceSelector: "all()"}}}, nil),
	}
	f.res = calc.Compute(ct.Input(node, f.objs))
	f.dp = dataplane.New(dataplane.Config{Runner: dataplane.ExecRunner{NetnsPath: f.node.Path()}, V4: dataplane.BackendDefaultV4, Logger: f.log})
	// Sinks: read everything, on the throughput port and benchPorts more.
	for port := 5000; port <= 5000+benchPorts; port++ {
		var l net.Listener
		if err := f.server.netns.Do(func(ns.NetNS) (err error) { l, err = net.Listen("tcp4", fmt.Sprintf(":%d", port)); return err }); err != nil {
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
	return f
}

// set applies the rules with flow logs on or off and starts or stops the
// collector (and conntrack accounting, which flow logs turn on).
func (f *flowBench) set(b *testing.B, on bool) {
	if f.stop != nil {
		f.stop()
		f.stop = nil
	}
	cfg := rules.DefaultConfig()
	cfg.FlowLogs = on
	f.dp.SetDesired(rules.Render(cfg, f.res, 4))
	if _, err := f.dp.Apply(context.Background()); err != nil {
		b.Fatal(err)
	}
	if err := f.node.Do(func(ns.NetNS) error {
		return writeSysctl("net/netfilter/nf_conntrack_acct", map[bool]string{true: "1", false: "0"}[on])
	}); err != nil {
		b.Fatal(err)
	}
	if !on {
		return
	}
	lookups := collector.NewLookups()
	for _, o := range f.objs {
		r := o.(v3.Resource)
		lookups.OnUpdates([]datastore.Update{{Type: datastore.EventAdded, Key: datastore.KeyOf(r), Object: r}})
	}
	f.store = collector.NewStore(100000)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- collector.Run(ctx, collector.Config{Node: node, NetnsPath: f.node.Path(), FlushInterval: 5 * time.Second,
			Resolver: lookups, Counters: collector.NewRuleCounters(nil), Store: f.store, Log: f.log})
	}()
	f.stop = func() {
		cancel()
		if err := <-done; err != nil {
			b.Errorf("collector: %v", err)
		}
	}
	time.Sleep(100 * time.Millisecond)
}

// throughput sends to the server's sink for d over 4 connections and
// returns Gbit/s.
func (f *flowBench) throughput(b *testing.B, d time.Duration) float64 {
	var total atomic.Int64
	deadline := time.Now().Add(d)
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			var c net.Conn
			if err := f.client.netns.Do(func(ns.NetNS) (err error) {
				c, err = net.Dial("tcp4", net.JoinHostPort(f.server.ip.String(), "5000"))
				return err
			}); err != nil {
				b.Error(err)
				return
			}
			defer c.Close()
			buf := make([]byte, 256<<10)
			for time.Now().Before(deadline) {
				n, err := c.Write(buf)
				total.Add(int64(n))
				if err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
	return float64(total.Load()) * 8 / d.Seconds() / 1e9
}

// newFlows opens rate new connections a second for d from 8 workers
// (each to one of the sink ports, closed at once) and returns how many it
// opened, the rate reached and the process's CPU seconds meanwhile.
func (f *flowBench) newFlows(b *testing.B, rate int, d time.Duration) (int, float64, float64) {
	const workers = 8
	cpu0, start := cpuSeconds(), time.Now()
	var n atomic.Int64
	done := make(chan struct{})
	for w := range workers {
		go func() {
			defer func() { done <- struct{}{} }()
			_ = f.client.netns.Do(func(ns.NetNS) error {
				interval := time.Second * workers / time.Duration(rate)
				for i := 0; time.Since(start) < d; i++ {
					if wait := time.Until(start.Add(time.Duration(i) * interval)); wait > 0 {
						time.Sleep(wait)
					}
					c, err := net.Dial("tcp4", net.JoinHostPort(f.server.ip.String(), fmt.Sprint(5001+(i*workers+w)%benchPorts)))
					if err != nil {
						b.Errorf("connection: %v", err)
						return nil
					}
					c.Close()
					n.Add(1)
				}
				return nil
			})
		}()
	}
	for range workers {
		<-done
	}
	elapsed := time.Since(start).Seconds()
	return int(n.Load()), float64(n.Load()) / elapsed, cpuSeconds() - cpu0
}

func cpuSeconds() float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}

// BenchmarkPrivilegedFlowLogs (make bench-flowlogs) measures, on one
// node's pods (veths through the node's filter table), TCP throughput
// with flow logs off and on in alternating rounds, and the collector's
// CPU at 1,000 new connections a second (the process's CPU with the
// collector on minus off under the same load), checking that the
// collector saw every connection.
func BenchmarkPrivilegedFlowLogs(b *testing.B) {
	f := newFlowBench(b)
	defer func() {
		if f.stop != nil {
			f.stop()
		}
	}()
	// Rounds in ABBA order, so that neither side always goes second.
	var off, on []float64
	for round := range 4 {
		for _, flowLogs := range [][]bool{{false, true}, {true, false}}[round%2] {
			f.set(b, flowLogs)
			if tp := f.throughput(b, 3*time.Second); flowLogs {
				on = append(on, tp)
			} else {
				off = append(off, tp)
			}
		}
	}
	medOff, medOn := median(off), median(on)
	fmt.Printf("TCP throughput, 4 streams, 3 s x 4 rounds each (ABBA): flow logs off %.2f Gbit/s (%v), on %.2f Gbit/s (%v): %.1f%%\n",
		medOff, round2(off), medOn, round2(on), (medOn-medOff)/medOff*100)

	const rate, secs = 1000, 10
	f.set(b, false)
	nOff, rateOff, cpuOff := f.newFlows(b, rate, secs*time.Second)
	f.set(b, true)
	nOn, rateOn, cpuOn := f.newFlows(b, rate, secs*time.Second)
	time.Sleep(6 * time.Second) // the last flush
	started := 0
	flows, _, _ := f.store.Snapshot(false)
	for _, fl := range flows {
		if fl.Reporter == "Dst" && fl.DestPort > 5000 {
			started += fl.ConnectionsStarted
		}
	}
	// The collector's CPU per new connection, at the target rate.
	cores := (cpuOn/float64(nOn) - cpuOff/float64(nOff)) * rate
	fmt.Printf("new connections for %d s (%d flow keys), target %d/s: off %d (%.0f/s) process CPU %.2f s, on %d (%.0f/s) %.2f s: collector %.3f cores at %d/s; flows logged %d connections\n",
		secs, benchPorts, rate, nOff, rateOff, cpuOff, nOn, rateOn, cpuOn, cores, rate, started)
	if started != nOn {
		b.Errorf("the collector logged %d of %d connections", started, nOn)
	}
	b.ReportMetric(medOff, "Gbit/s-off")
	b.ReportMetric(medOn, "Gbit/s-on")
	b.ReportMetric(cores, "collector-cores")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return s[len(s)/2]
}

func round2(xs []float64) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = fmt.Sprintf("%.2f", x)
	}
	return out
}
