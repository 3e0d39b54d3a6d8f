// Package routes is felix's route manager: it keeps a node's routes to
// the other nodes' IPAM blocks, and the encapsulation devices they go
// through, in agreement with the datastore.
//
// The pipeline is the same as the policy path's: the cluster's Nodes and
// IP pools as felix reads them (infra.Cluster, the daemon's one reading,
// shared with the tunnel rules), the IPAMBlocks and this node's
// WorkloadEndpoints (fed by the daemon's syncer) are turned by Compute, a
// pure function, into a Desired state: the local workload routes (as the
// CNI writes them; they never depend on this node's own address), and,
// once this node's Node has an address, the vxlan.calico / tunl0
// devices, the routes to remote blocks (through the VXLAN VTEP of the
// block's node, through tunl0 onlink to the node's address, or directly
// via the node's address for same-subnet CrossSubnet traffic), and for
// VXLAN the permanent ARP and FDB entries of every remote VTEP. The
// Driver (driver_linux.go) reconciles that with the kernel of one network
// namespace through a netlink handle: it reads what is there, plans
// (plan.go, pure: what it owns and no longer wants goes, what is missing
// is added) and applies the plan. The Manager owns the loop: it
// recomputes when its inputs change, resyncs periodically to repair
// drift, and retries with backoff after a failure.
//
// Ownership: felix's routes carry Calico's DeviceRouteProtocol (3, boot)
// as the CNI plugin's workload routes do; the driver only ever touches
// routes of that protocol that go through its tunnel devices, or via a
// gateway to a destination inside an IP pool (never a workload route,
// which has no gateway, and never a default route).
package routes
