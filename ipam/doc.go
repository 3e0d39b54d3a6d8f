// Package ipam will hold Calico-style IP address management over the
// datastore client: pools, node-affine blocks, handles, borrowing,
// reservations and leak GC. Not yet implemented: see the [ipam] issue.
package ipam
