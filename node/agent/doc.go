// Package agent is calico-node: the one process of the calico-node
// DaemonSet. Run initialises the datastore where needed and registers the
// node (package startup, node/registration), writes the node name file
// the CNI plugin reads, then runs felix (felix/agent) and, with the bird
// backend, confd (confd/agent) in-process with BIRD under a supervisor
// (node/birdsup), keeps the node's addresses and tunnel addresses current,
// fills in the CalicoNodeStatus resources of the node, and serves one
// health endpoint for all of it (node/health). Cancelling Run's context is
// a planned stop: the dataplane stays in place and BIRD stops with a
// graceful restart, so traffic keeps flowing until the next calico-node
// converges again.
package agent
