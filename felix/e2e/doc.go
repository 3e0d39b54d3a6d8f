// Package e2e holds felix's end-to-end packet tests (privileged): a node
// network namespace with pod namespaces wired the way Calico's CNI plugin
// wires them, felix's calculation, rendering and drivers programming the
// node namespace, and real TCP, UDP and ICMP traffic between the pods
// proving each policy's effect.
package e2e
