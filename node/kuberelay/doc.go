// Package kuberelay is calico-node's relay for the node's CNI plugin on
// the Kubernetes datastore: an HTTP server on a root-only unix socket that
// answers the plugin's reads that may be a little behind from
// calico-node's own watches.
//
// Why: an ADD is a process that lives for one call. Against the API server
// it pays a round of reads (pools, reservations, IPAM settings, the node,
// its block affinities and block, the pod, its namespace) before its first
// write. The plugin sends those reads with resourceVersion=0, which the
// API server answers from its watch cache; the relay answers them from
// watches of the same objects, on the node, while the plugin's own
// connection to the API server (for its writes) is still being set up.
//
// The relay holds no credentials of the plugin's and forwards nothing: a
// request it does not hold exactly (a synced watch of that resource, the
// same label selector, no field selector, a Get of an object the watch
// has, or a Get the watch would have if it existed) is answered 421
// Misdirected Request, and the plugin sends it to the API server itself
// (datastore/kdd ViaRelay). What it answers is what calico-node may read
// anyway, to a caller that is root on the node. Nothing it does changes
// what is stored.
package kuberelay
