// Package wireguard is felix's WireGuard encryption between nodes, as
// Calico's felix/wireguard: one device per IP version (wireguard.cali,
// wg-v6.cali), a peer per other node that publishes a public key, its
// allowed IPs being what routes to that node (its IPAM blocks, the
// addresses it borrows, its tunnel addresses and, with host encryption,
// its own addresses), and a routing table holding those destinations on
// the device, reached through one rule (`not fwmark M/M lookup T`, at
// wireguardRoutingRulePriority) that the device's own encrypted packets,
// carrying M, skip.
//
// The core here is pure: Compute turns the cluster (felix/infra's one
// reading of Nodes and pools) and the IPAM blocks into the desired
// device, peers and routes of one node; PlanPeers and PlanRoutes diff
// that against what the kernel holds, so a changed node, key or block
// changes only its peer and its routes. The driver (driver_linux.go)
// applies the plans with wgctrl and netlink; the private key lives only
// in the kernel's device, as in Calico (never in the datastore; a new
// device gets a new key, which the agent publishes on the Node).
package wireguard
