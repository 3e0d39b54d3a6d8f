// Package cniplugin will hold the `calico` CNI plugin: netconf parsing, pod
// wiring in the pod's network namespace (veth, routes, proxy-ARP) and the
// WorkloadEndpoint record. Not yet implemented: see the [cni] issue.
package cniplugin
