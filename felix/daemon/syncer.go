package daemon

import (
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
)

// NewSyncer returns the syncer felix follows the datastore with: over the
// Kubernetes datastore, kdd's informer-based syncer (shared informers and
// a rate-limited work queue, as Calico's felix watches in Kubernetes
// mode); over any other client (etcd), the generic watch syncer, lean
// (the daemon and its calculation keep what they need of each object, so
// deletions carry only the key). Either way cb receives Kinds and the
// extra kinds (the flow log collector's staged policies).
func NewSyncer(c datastore.Client, cb datastore.SyncerCallbacks, extra ...string) datastore.Syncer {
	kinds := append(append([]string{}, Kinds...), extra...)
	if kc, ok := c.(*kdd.Client); ok {
		return kdd.NewSyncer(kc, kinds, cb)
	}
	return datastore.NewWatchSyncer(c, kinds, cb, datastore.DefaultBackoff).Lean()
}
