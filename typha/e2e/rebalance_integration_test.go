//go:build integration

package e2e

import (
	"context"
	"fmt"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestTyphaRebalanceAndGracefulShutdown: Typhas in Calico's kubernetes
// rebalancing mode. 20 nodes all follow typha-a, the only replica; two
// more are published behind the Service, and typha-a drops connections
// one at a time down to its share (Calico's formula: 2 syncers x (1 + 20
// nodes x 1.2 / 2) = 26 of the 40), whose clients resync through the new
// replicas. Then typha-b is sent SIGTERM and drops its clients one at a
// time before it exits. No move makes felix write its dataplane or confd
// apply a BIRD configuration.
func TestTyphaRebalanceAndGracefulShutdown(t *testing.T) {
	const nodes = 20
	c := startCluster(t)
	c.addNodes(t, nodes)
	c.addPolicies(t, 10)
	c.addHostEndpoints(t, nodes)
	env := []string{"TYPHA_CONNECTIONREBALANCINGMODE=kubernetes", "TYPHA_K8SSERVICEPOLLINTERVALSECS=0.5",
		"TYPHA_MAXCONNECTIONSLOWERLIMIT=1", "TYPHA_CONNECTIONDROPINTERVALSECS=0.05", "TYPHA_SHUTDOWNTIMEOUTSECS=20", "TYPHA_LOGSEVERITYSCREEN=Info"}
	a := startTypha(t, c, "typha-a", env...)
	dial := c.publish(t, a)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	ns := startNodes(ctx, t, c, nodes, dial, &wg)
	waitUntil(t, "every client on typha-a", 30*time.Second, func() bool { return a.metric(t, "typha_connections_streaming") == 2*nodes })
	time.Sleep(time.Second) // let the dataplanes settle
	noRewrites := markWrites(ns)

	b, d := startTypha(t, c, "typha-b", env...), startTypha(t, c, "typha-c", env...)
	c.publish(t, b, d)
	streaming := func(ty *typha) int { return int(ty.metric(t, "typha_connections_streaming")) }
	took := waitUntil(t, "typha-a down to its share", 60*time.Second, func() bool {
		onA, onB, onC := streaming(a), streaming(b), streaming(d)
		return onA <= 26 && onA+onB+onC == 2*nodes
	})
	dropped := a.metric(t, "typha_connections_dropped")
	t.Logf("rebalanced in %s: typha-a %d, typha-b %d, typha-c %d connections; typha-a dropped %.0f",
		took.Round(time.Millisecond), streaming(a), streaming(b), streaming(d), dropped)
	if dropped < 14 {
		t.Errorf("typha-a dropped %.0f connections, want at least 14", dropped)
	}
	noRewrites(t, "rebalancing")

	onB := streaming(b)
	if onB < 2 {
		t.Fatalf("typha-b has %d connections: the graceful shutdown would prove nothing", onB)
	}
	if err := syscall.Kill(b.Pid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	moved := waitUntil(t, "typha-b's clients on the others", 60*time.Second, func() bool {
		if n, err := scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", b.metricsPort), "typha_connections_streaming"); err == nil {
			seen[int(n)] = true
		}
		return streaming(a)+streaming(d) == 2*nodes
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("typha-b's log:\n%s", b.Log())
		}
	})
	exited := waitUntil(t, "typha-b exited", 30*time.Second, func() bool { return !b.Running() })
	t.Logf("typha-b (SIGTERM with %d connections): its clients on the others after %s, exited %s later; counts seen %v",
		onB, moved.Round(time.Millisecond), exited.Round(time.Millisecond), seen)
	between := 0
	for n := range seen {
		if n > 0 && n < onB {
			between++
		}
	}
	if between == 0 {
		t.Errorf("typha-b went from %d connections to none at once (counts seen %v): not one at a time", onB, seen)
	}
	noRewrites(t, "graceful shutdown")
}
