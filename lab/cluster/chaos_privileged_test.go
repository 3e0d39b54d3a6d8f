//go:build privileged

package cluster

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"
)

// TestPrivilegedClusterChaos is `make chaos` made short for the suite:
// every fault in turn on a fresh cluster, under a churn of
// TABBY_CHAOS_PODS pod creations (default 30) through the API, the
// datastore down 10 s and the node without power 10 s; each invariant
// (no address on two live pods, the stream between the other two nodes
// unbroken, no connection through the default-deny namespace, no leak
// after any fault, ready again after each) must hold.
func TestPrivilegedClusterChaos(t *testing.T) {
	c := testCluster(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	pods, _ := strconv.Atoi(os.Getenv("TABBY_CHAOS_PODS"))
	if pods <= 0 {
		pods = 30
	}
	sum, err := c.Chaos(ctx, ChaosOptions{Pods: pods, Outage: 10 * time.Second, PowerOff: 10 * time.Second, Out: testWriter{t}})
	if err != nil {
		t.Errorf("chaos run: %v", err)
	}
	for _, f := range sum.Faults {
		t.Log(f.Line())
	}
	for _, i := range sum.Invariants() {
		if !i.OK {
			t.Error(i)
			continue
		}
		t.Log(i)
	}
}
