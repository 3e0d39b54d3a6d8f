package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
)

// claimLock is ipam.Config.ClaimLock for the plugin's one-call processes:
// an flock on a file of the node's in the hint folder, so that ADDs
// started together on a node take turns at claiming a new block instead
// of all claiming it (measured on the Kubernetes datastore, where each
// of those requests costs milliseconds: see cni-plugin/STATUS.md). Like
// the hints it only saves work: when the file cannot be used, or the
// wait passes claimLockWait, the process claims without it.
func claimLock(dir string, c *netconf.NetConf) func(ctx context.Context, node string) (func(), bool) {
	return func(ctx context.Context, node string) (func(), bool) {
		noop := func() {}
		if dir == "" {
			return noop, false
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return noop, false
		}
		// Never block opening it, never follow a link (as the hints: the
		// folder is the node's, but a FIFO there must not hang an ADD).
		path := filepath.Join(dir, "ipam-claim-"+nodeKey(c, node)+".lock")
		f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_NONBLOCK|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
		if err != nil {
			return noop, false
		}
		if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
			f.Close()
			return noop, false
		}
		deadline := time.Now().Add(claimLockWait)
		for waited := false; ; waited = true {
			err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
			if err == nil {
				return func() {
					_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
					f.Close()
				}, waited
			}
			if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) || ctx.Err() != nil {
				f.Close()
				return noop, waited
			}
			time.Sleep(time.Millisecond)
		}
	}
}

// claimLockWait bounds the wait for another process's claim: one takes a
// handful of datastore round trips.
const claimLockWait = 2 * time.Second
