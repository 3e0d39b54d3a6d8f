//go:build integration

package compactor

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/testservers"
)

func dial(t *testing.T, e *testservers.Etcd) *clientv3.Client {
	t.Helper()
	cli, err := Dial(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// TestIntegrationCompaction: history older than one period is compacted
// away, never the last period's.
func TestIntegrationCompaction(t *testing.T) {
	e := testservers.StartEtcd(t)
	cli := dial(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	first, err := cli.Put(ctx, "/calico/test", "1")
	if err != nil {
		t.Fatal(err)
	}
	compacted := make(chan int64, 10)
	rctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(rctx, cli, 200*time.Millisecond, slog.Default(), func(rev int64) { compacted <- rev })
	}()
	var rev int64
	select {
	case rev = <-compacted:
	case <-ctx.Done():
		t.Fatal("no compaction")
	}
	stop()
	<-done
	if rev < first.Header.Revision {
		t.Fatalf("compacted to %d, before the write at %d", rev, first.Header.Revision)
	}
	if _, err := cli.Get(ctx, "/calico/test", clientv3.WithRev(first.Header.Revision-1)); !errors.Is(err, rpctypes.ErrCompacted) {
		t.Fatalf("history before %d still there: %v", rev, err)
	}
	if _, err := cli.Get(ctx, "/calico/test", clientv3.WithRev(rev)); err != nil {
		t.Fatalf("the compaction revision itself is gone: %v", err)
	}
}

// TestIntegrationCompactorsTakeTurns: two compactors on one etcd (two
// replicas, or one beside kube-apiserver): one round, one compaction.
func TestIntegrationCompactorsTakeTurns(t *testing.T) {
	e := testservers.StartEtcd(t)
	a, b := dial(t, e), dial(t, e)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var va, ra, vb, rb int64
	var err error
	var ca, cb bool
	compactions := 0
	for round := 0; round < 6; round++ {
		if _, err := a.Put(ctx, "/calico/x", "v"); err != nil {
			t.Fatal(err)
		}
		if va, ra, ca, err = step(ctx, a, va, ra); err != nil {
			t.Fatal(err)
		}
		if vb, rb, cb, err = step(ctx, b, vb, rb); err != nil {
			t.Fatal(err)
		}
		if ca && cb {
			t.Fatalf("round %d: both compacted", round)
		}
		if ca || cb {
			compactions++
		}
	}
	if compactions == 0 {
		t.Fatal("no compaction in six rounds")
	}
}
