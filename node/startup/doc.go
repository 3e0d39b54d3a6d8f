// Package startup is what calico-node does before it starts felix and
// confd, as Calico's node startup does: it reads Calico's environment
// (config.go: pure, NODENAME, CALICO_NETWORKING_BACKEND, IP, IP6, the
// CALICO_IPV4POOL_* / CALICO_IPV6POOL_* pool settings, NO_DEFAULT_POOLS,
// CLUSTER_TYPE, AS, CALICO_K8S_NODE_REF, CALICO_NODENAME_FILE), initialises
// the datastore where it is missing something (init.go: ClusterInformation,
// the default, kube-admin and kube-baseline tiers, the default
// FelixConfiguration, BGPConfiguration and IPAMConfiguration, the default
// IP pools) and writes the node name file the CNI plugin reads
// (nodename.go). Node registration itself is package node/registration.
package startup
