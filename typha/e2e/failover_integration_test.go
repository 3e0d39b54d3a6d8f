//go:build integration

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	confdagent "github.com/tabbynet/tabby/confd/agent"
	"github.com/tabbynet/tabby/datastore"
	felixdaemon "github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/typha/discovery"
)

// node is one simulated node: felix's daemon on the real dataplane driver
// over a fake kernel, and confd's daemon with an applier that counts, both
// following Typha through their own client code, found through the
// calico-typha Service.
type node struct {
	kernel  *fake.Kernel
	applies atomic.Int64 // confd's BIRD configurations applied
	confdIn atomic.Bool
}

type dialer = func(context.Context, string, string) (net.Conn, error)

type countingApplier struct{ n *node }

func (a countingApplier) Apply(context.Context, string) error { a.n.applies.Add(1); return nil }

func startNode(ctx context.Context, t *testing.T, c *cluster, name string, dial dialer, wg *sync.WaitGroup) *node {
	t.Helper()
	n := &node{kernel: fake.NewKernel()}
	log := quietLog()
	ds := c.client(t)
	settings := discovery.Settings{K8sServiceName: "calico-typha", K8sNamespace: "kube-system", Dial: dial}

	dp := dataplane.New(dataplane.Config{Runner: n.kernel, V4: dataplane.BackendDefaultV4, Logger: log, RefreshInterval: time.Hour})
	d := felixdaemon.New(felixdaemon.Config{NodeName: name, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log})
	fs, err := felixdaemon.NewTyphaSyncer(ds, settings, name, log, d)
	if err != nil {
		t.Fatal(err)
	}
	cd := confd.NewDaemon(confd.Config{NodeName: name, Logger: log, Debounce: 5 * time.Millisecond,
		OnSync: func(err error) { n.confdIn.Store(err == nil) }}, countingApplier{n})
	cs, err := confdagent.TyphaSyncer(ds, settings, name, log, cd)
	if err != nil {
		t.Fatal(err)
	}
	wg.Add(2)
	go func() { defer wg.Done(); _ = d.Run(ctx, fs) }()
	go func() { defer wg.Done(); cd.RunSyncer(ctx, cs) }()
	return n
}

// startNodes starts n nodes and waits until every felix has programmed
// its dataplane and every confd has applied its configuration.
func startNodes(ctx context.Context, t *testing.T, c *cluster, n int, dial dialer, wg *sync.WaitGroup) []*node {
	t.Helper()
	var ns []*node
	for i := range n {
		ns = append(ns, startNode(ctx, t, c, nodeName(i), dial, wg))
	}
	waitUntil(t, "every felix programmed and every confd applied", 60*time.Second, func() bool {
		for _, n := range ns {
			if n.kernel.Count("iptables") == 0 || !n.confdIn.Load() {
				return false
			}
		}
		return true
	})
	return ns
}

// markWrites notes what each node has written so far; the function it
// returns, called after a move between Typhas, waits for anything the
// move would write and fails the test for every felix dataplane write or
// BIRD configuration applied since.
func markWrites(ns []*node) func(t *testing.T, when string) {
	before := make([]int, len(ns))
	applied := make([]int64, len(ns))
	for i, n := range ns {
		before[i], applied[i] = n.restores(), n.applies.Load()
	}
	return func(t *testing.T, when string) {
		t.Helper()
		time.Sleep(2 * time.Second) // anything the move would write, written
		for i, n := range ns {
			if d := n.restores() - before[i]; d != 0 {
				t.Errorf("%s: %s: felix wrote the dataplane %d times", when, nodeName(i), d)
			}
			if d := n.applies.Load() - applied[i]; d != 0 {
				t.Errorf("%s: %s: confd applied %d BIRD configurations", when, nodeName(i), d)
			}
		}
	}
}

// restores is how many times felix wrote iptables or ipsets.
func (n *node) restores() int {
	w := 0
	for _, c := range n.kernel.Calls() {
		if strings.Contains(c, "restore") {
			w++
		}
	}
	return w
}

// TestTyphaReplicaKilled: nodes follow two Typhas found through the
// calico-typha Service; one is SIGKILLed while they are connected. Every
// client it had reconnects through the other within seconds, and neither
// felix (nothing written to iptables or ipsets) nor confd (no BIRD
// configuration applied) rewrites anything for the resync; a policy
// changed afterwards still reaches every felix.
func TestTyphaReplicaKilled(t *testing.T) {
	const nodes = 20
	c := startCluster(t)
	c.addNodes(t, nodes)
	c.addPolicies(t, 10)
	c.addHostEndpoints(t, nodes)
	a, b := startTypha(t, c, "typha-a"), startTypha(t, c, "typha-b")
	dial := c.publish(t, a, b)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ns := startNodes(ctx, t, c, nodes, dial, &wg)
	waitUntil(t, "every client connected", 30*time.Second, func() bool {
		return a.metric(t, "typha_connections_streaming")+b.metric(t, "typha_connections_streaming") == 2*nodes
	})
	time.Sleep(time.Second) // let the dataplanes settle
	onA := int(a.metric(t, "typha_connections_streaming"))
	if onA == 0 {
		t.Fatal("no client chose typha-a: the test would prove nothing")
	}
	noRewrites := markWrites(ns)

	a.Kill()
	took := waitUntil(t, "every client on typha-b", 20*time.Second, func() bool {
		return b.metric(t, "typha_connections_streaming") == 2*nodes
	})
	noRewrites(t, "the resync")
	t.Logf("typha-a killed with %d of %d connections; all on typha-b after %s; dataplane writes for the resync: 0",
		onA, 2*nodes, took.Round(time.Millisecond))
	if took > 10*time.Second {
		t.Errorf("resync through typha-b took %s", took)
	}

	// Still live: a policy change reaches every felix's dataplane.
	before := make([]int, nodes)
	for i, n := range ns {
		before[i] = n.restores()
	}
	if _, err := c.ds.Update(context.Background(), withOrder(t, c, "gnp-3", 333)); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the policy change written by every felix", 30*time.Second, func() bool {
		for i, n := range ns {
			if n.restores() == before[i] {
				return false
			}
		}
		return true
	})
}

// withOrder returns the policy read back with a new order.
func withOrder(t testing.TB, c *cluster, name string, order float64) *v3.GlobalNetworkPolicy {
	t.Helper()
	got, err := c.ds.Get(context.Background(), datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: name})
	if err != nil {
		t.Fatal(fmt.Errorf("getting %s: %w", name, err))
	}
	p := got.(*v3.GlobalNetworkPolicy)
	p.Spec.Order = &order
	return p
}
