// Package felix is the node agent's policy path. Data flows one way:
// the datastore syncer feeds daemon/, which runs the pure calculation
// (calc/) whose desired state is rendered into iptables chains and ipsets
// (rules/) and reconciled into the kernel by drivers (dataplane/);
// cmd/felix is the thin main. e2e/ proves policies on real packets in
// network namespaces. See STATUS.md for what is done and what is next.
package felix
