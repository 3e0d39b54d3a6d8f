// Package cluster runs a real Kubernetes cluster on one machine, kind-style
// but without Docker, and installs Tabby on it as a user would: a control
// plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler) in
// a network namespace of its own holding the underlay bridges, and nodes,
// each a network namespace plus a private mount namespace running
// containerd + runc, a kubelet and kube-proxy. Tabby's image, a pause image
// and agnhost (for test pods) are imported into every node's containerd;
// then `kubectl apply -f manifests/tabby.yaml` (or tabby-etcd.yaml) runs
// exactly as a user's, the pool mode set with `kubectl set env`.
//
// Nothing is added to the host's network: every link is made inside the
// cluster's namespaces, and the API server (and etcd) are reached from the
// root namespace's loopback through a forwarder (Forward) that dials them
// from inside the control plane's namespace. Each node's mount namespace
// has its own /var/lib, /var/log, /run/containerd, /run/calico,
// /etc/cni/net.d and /opt/cni/bin (bind mounts of folders under the
// cluster's state folder), so the DaemonSet's hostPath volumes land in the
// node, and kubelet's cgroups live under /<prefix>-<node> in every cgroup
// hierarchy.
//
// Everything the cluster makes is named with one prefix (State.Prefix):
// the namespaces /run/netns/<prefix>-*, the cgroups /<prefix>-*, and every
// process it starts carries TABBY_CLUSTER_ID=<prefix> in its environment.
// Down finds and removes all of it by the prefix, whatever state Up left it
// in (also after a kill -9 of the harness).
//
// RunE2E runs Kubernetes' own e2e tests (e2e.test from the Go module
// proxy, through the ginkgo CLI) against the cluster and counts the
// result from ginkgo's JSON report; the agnhost and pause images also
// carry the names e2e.test asks for, so nothing is pulled. For the
// sig-network conformance specs a cluster can run CoreDNS as its DNS
// (Options.DNS), and every cluster's control plane routes to each pod via
// its node (PodRoutes), so kube-apiserver's proxy reaches pods.
package cluster
