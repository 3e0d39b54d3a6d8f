package plugin

import (
	"context"
	"path/filepath"
	"time"

	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/ipam/cniipam"
)

// claimLock is ipam.Config.ClaimLock for the plugin's one-call processes:
// a host flock (cniipam.HostLock) on a file of the node's in the hint
// folder, so that ADDs started together on a node take turns at claiming
// a new block instead of all claiming it (see cni-plugin/STATUS.md). Like
// the hints it only saves work: when the file cannot be used, or the wait
// passes claimLockWait, the process claims without it.
func claimLock(dir string, c *netconf.NetConf) func(ctx context.Context, node string) (func(), bool) {
	return func(ctx context.Context, node string) (func(), bool) {
		if dir == "" {
			return func() {}, false
		}
		return cniipam.HostLock(ctx, filepath.Join(dir, "ipam-claim-"+nodeKey(c, node)+".lock"), claimLockWait)
	}
}

// claimLockWait bounds the wait for another process's claim: one takes a
// handful of datastore round trips.
const claimLockWait = 2 * time.Second
