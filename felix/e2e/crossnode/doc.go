// Package crossnode holds felix's cross-node end-to-end tests: a 3-node
// internal/multinode lab (real etcd, felix per node with its route
// manager, pods wired by the real calico CNI binary, nodes registered by
// node/registration) proving pod-to-pod traffic across nodes per
// encapsulation mode, NAT outgoing and the removal of a deleted node's
// routes. Only tests live here.
package crossnode
