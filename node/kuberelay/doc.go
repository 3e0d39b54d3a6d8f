// Package kuberelay is calico-node's relay for the node's CNI plugin on
// the Kubernetes datastore: an HTTP server on a root-only unix socket that
// the plugin's API client talks to instead of the API server.
//
// Why: an ADD is a process that lives for one call. Against the API server
// it pays a TLS handshake and a round of nine reads (pools, reservations,
// IPAM settings, the node, its block affinities, the pod, its namespace,
// its blocks, its handle) before its first write; calico-node is already
// watching most of that. Through the relay the reads the plugin allows to
// be a little behind (resourceVersion=0, which the API server answers
// from its own watch cache) are answered from calico-node's watches of
// the same objects, and every other request (writes, consistent reads,
// watches) goes on to the API server over calico-node's connection,
// already up.
//
// Authority stays the plugin's: a forwarded request carries the plugin's
// own bearer token (one without is refused), over a connection that holds
// no credentials of calico-node's. What is answered locally is what
// calico-node may read anyway, to a caller that is root on the node.
//
// A cached answer is given only when the cache holds exactly what the
// request asks: a synced informer of that resource, with the same label
// selector and no field selector. A Get the cache misses is forwarded
// unless the cache holds every object of its resource (then it is the
// API server's 404, as its watch cache would say). Nothing here changes
// what is stored: the plugin's writes are the same requests, forwarded.
package kuberelay
