// Package confd turns Calico's BGP resources into a running BIRD 2
// configuration for one node.
//
// The pipeline is: datastore syncer (BGPConfiguration, BGPPeer, BGPFilter,
// Node, IPPool, BlockAffinity) -> confd/render (pure: resources in, one
// deterministic bird.conf text out) -> confd/bird (edge: write atomically,
// validate with `bird -p -c`, swap in, `birdc configure`). This package is
// the wiring: Daemon is the syncer's callback, caches the resources and,
// debounced and only once in sync, renders and applies. See STATUS.md.
package confd
