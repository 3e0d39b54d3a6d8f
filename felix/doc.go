// Package felix is the node agent's policy path. Data flows one way:
// the datastore syncer (and ifacewatch/, the node's interface addresses)
// feed daemon/, which runs the pure calculation (calc/) and the one pure
// reading of the cluster's Nodes and IP pools (infra/); the calculation's
// desired state is rendered into iptables chains and ipsets (rules/) and
// reconciled into the kernel by drivers (dataplane/), and the same
// reading of the cluster, with the IPAM blocks, gives the routes and
// tunnel devices (routes/); agent/ wires it all, cmd/felix is the thin
// main. e2e/ proves policies on real packets in network namespaces. See
// STATUS.md for what is done and what is next.
package felix
