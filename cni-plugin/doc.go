// Package cniplugin holds the `calico` CNI plugin and its parts:
//
//   - netconf: Calico's network configuration, parsed and validated as
//     Calico does (an existing Calico conflist works unchanged);
//   - plugin: ADD, DEL, CHECK, STATUS and GC (calico-ipam in-process, any
//     other IPAM plugin delegated through libcni), the WorkloadEndpoint or,
//     in Kubernetes mode, the pod annotations, rollback of every failure;
//   - wiring: the pod's veth pair, addresses, routes and sysctls, as Calico
//     wires a pod;
//   - kubepods: pod access for the Kubernetes datastore;
//   - cmd/calico (lean, etcd; hands Kubernetes-mode calls to calico-k8s),
//     cmd/calico-k8s and cmd/calico-ipam: the binaries;
//   - e2e: privileged tests through libcni and `make bench-cni`.
//
// See STATUS.md for what is done and measured.
package cniplugin
