//go:build integration

package daemon_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/daemon"
	fake "github.com/tabbynet/tabby/felix/dataplane/testing"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestDaemonWatchesEtcd runs the daemon against a real etcd through
// datastore.NewWatchSyncer (with the fake kernel): resources written to
// the store become chains, and a policy deleted from the store loses its
// chains.
func TestDaemonWatchesEtcd(t *testing.T) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	var gnp *v3.GlobalNetworkPolicy
	for _, o := range ct.Scenario() {
		r := o.(v3.Resource)
		if r.Validate().Err() != nil {
			continue // the scenario's bad input is rejected by the store
		}
		if _, err := c.Create(ctx, r); errors.Is(err, datastore.ErrInvalid) {
			continue // bad input the store refuses (a policy in a missing tier)
		} else if err != nil {
			t.Fatalf("creating %s: %v", datastore.KeyOf(r), err)
		}
		if p, ok := r.(*v3.GlobalNetworkPolicy); ok && p.Name == "security.deny-blocked" {
			gnp = p
		}
	}

	k := fake.NewKernel()
	d := newDaemon(k)
	syncer := datastore.NewWatchSyncer(c, daemon.Kinds, d, datastore.Backoff{})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, syncer) }()
	t.Cleanup(func() { cancel(); <-done })

	// The workload's chain goes to its (shared) body: compare bodies.
	body := func() []string {
		rules := k.Rules(4, "cali-tw-cali1111")
		if len(rules) != 1 || !strings.Contains(rules[0], "-g ") {
			return nil
		}
		return k.Rules(4, rules[0][strings.Index(rules[0], "-g ")+3:])
	}
	waitFor(t, "endpoint chains from etcd", func() bool { return len(body()) > 0 })
	before := body()
	if _, err := c.Delete(ctx, datastore.KeyOf(gnp), datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the deleted policy to leave the endpoint chain", func() bool {
		now := body()
		return len(now) > 0 && len(now) < len(before) && !slices.Equal(now, before)
	})
}
