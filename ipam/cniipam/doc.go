// Package cniipam is calico-ipam, the CNI IPAM plugin, as a library: the
// `calico` plugin calls it in-process (an ADD does not pay for a second
// process) and cni-plugin/cmd/calico-ipam wraps it in a thin main. It maps
// CNI ADD / DEL / CHECK / GC / STATUS (spec 1.1) onto ipam.Allocator and
// IPAM's errors onto CNI error codes:
//
//	4   bad CNI_ARGS (e.g. IP=10.0.0.999), missing container ID / network / node
//	6   network configuration is not JSON
//	7   bad ipam section or bad annotation (assign_ipv4 "maybe", ipAddrs not a list)
//	11  datastore unreachable, or compare-and-swap kept losing: try again later
//	50  STATUS: datastore unreachable or no enabled pool for workloads
//	100 pool exhausted for this node (message names the pools and the node)
//	101 unknown, disabled or no usable pool (ipv4_pools / annotations)
//	102 requested address outside every pool, reserved, or already in use
//	999 anything else
//
// Handles are "<network name>.<container ID>" (Calico's, e.g.
// k8s-pod-network.<id>); attributes are namespace, pod and node.
package cniipam
