package daemon

import (
	"log/slog"
	"slices"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	"github.com/tabbynet/tabby/typha/discovery"
	"github.com/tabbynet/tabby/typha/syncclient"
	"github.com/tabbynet/tabby/typha/syncproto"
)

// NewSyncer returns the syncer felix follows the datastore with: over the
// Kubernetes datastore, kdd's informer-based syncer (shared informers and
// a rate-limited work queue, as Calico's felix watches in Kubernetes
// mode); over any other client (etcd), the generic watch syncer, lean
// (the daemon and its calculation keep what they need of each object, so
// deletions carry only the key). Either way cb receives SyncKinds(c) and
// the extra kinds (the flow log collector's staged policies).
func NewSyncer(c datastore.Client, cb datastore.SyncerCallbacks, extra ...string) datastore.Syncer {
	kinds := append(slices.Clone(SyncKinds(c)), extra...)
	if kc, ok := c.(*kdd.Client); ok {
		return kdd.NewSyncer(kc, kinds, cb)
	}
	return datastore.NewWatchSyncer(c, kinds, cb, datastore.DefaultBackoff).Lean()
}

// SyncKinds are the kinds felix follows over c: Kinds, and where it
// follows Services (FollowsServices) their EndpointSlices.
func SyncKinds(c datastore.Client) []string {
	if FollowsServices(c) {
		return append(slices.Clone(Kinds), v3.KindKubernetesEndpointSlice)
	}
	return Kinds
}

// FollowsServices reports whether felix follows Kubernetes Services over
// c, and so enforces rules' services matches (Config.FollowServices): on
// the Kubernetes datastore, as Calico's felix, which reads EndpointSlices
// only there. Over etcd such rules fail closed (calc.ReasonServices) and
// the etcd datastore refuses to store them.
func FollowsServices(c datastore.Client) bool {
	_, ok := c.(*kdd.Client)
	return ok
}

// NewTyphaSyncer returns the syncer felix follows Typha with when its
// settings name one (TyphaAddr, TyphaK8sServiceName): Typha's felix
// stream, of which cb receives SyncKinds(c) and the extra kinds, lean as
// NewSyncer's, resynced on a reconnection without a delete and re-add of
// unchanged objects (typha/syncclient). The Service is looked up with c's
// Kubernetes client (the Kubernetes datastore).
func NewTyphaSyncer(c datastore.Client, t discovery.Settings, hostname string, log *slog.Logger, cb datastore.SyncerCallbacks, extra ...string) (datastore.Syncer, error) {
	kube, err := clientset.Of(c)
	if err != nil {
		return nil, err
	}
	cfg, err := t.Config(kube, discovery.Client{SyncerType: syncproto.SyncerTypeFelix,
		Kinds: append(slices.Clone(SyncKinds(c)), extra...), Lean: true, Hostname: hostname, Info: "felix", Log: log})
	if err != nil {
		return nil, err
	}
	return syncclient.New(cfg, cb), nil
}
