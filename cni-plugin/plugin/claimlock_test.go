package plugin

import (
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
)

// TestClaimLock: a second process of the node waits for the first's
// claim and is told it waited; another node does not wait; a FIFO where
// the lock file goes neither hangs the call nor locks anything.
func TestClaimLock(t *testing.T) {
	dir := t.TempDir()
	conf := &netconf.NetConf{DatastoreType: "kubernetes"}
	lock := claimLock(dir, conf)
	ctx := context.Background()
	unlock, waited := lock(ctx, "n1")
	if waited {
		t.Fatal("first holder waited")
	}
	if u, w := lock(ctx, "n2"); w {
		t.Fatal("another node's lock waited")
	} else {
		u()
	}
	got := make(chan bool)
	go func() {
		u, w := lock(ctx, "n1")
		u()
		got <- w
	}()
	select {
	case <-got:
		t.Fatal("second holder did not wait")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	if w := <-got; !w {
		t.Fatal("second holder not told it waited")
	}

	fifo := filepath.Join(dir, "ipam-claim-"+nodeKey(conf, "n3")+".lock")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	done := make(chan bool)
	go func() { u, w := lock(ctx, "n3"); u(); done <- w }()
	select {
	case w := <-done:
		if w {
			t.Fatal("FIFO: waited")
		}
	case <-time.After(3 * time.Second):
		t.Fatal("a FIFO in place of the lock file hung the call")
	}
}
