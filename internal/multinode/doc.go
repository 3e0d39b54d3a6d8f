// Package multinode builds a small cluster of network namespaces for
// privileged tests of cross-node pod networking: N node namespaces on a
// shared underlay (one L2 subnet on a bridge, or two subnets joined by the
// underlay namespace acting as their router), an "external" namespace
// behind the same router, a real etcd, felix per node (in-process) and
// pods wired by the real `calico` CNI binary through libcni from inside
// their node's namespace, exactly as a container runtime does.
//
// Everything it creates carries one unique prefix (Cluster.Prefix): the
// named namespaces /run/netns/<prefix>-*, and every interface lives inside
// them. All of it is removed in t.Cleanup, also after a failure. The root
// namespace's network is never touched: links are created by netlink
// handles bound to the test's namespaces.
package multinode
