// Package e2e holds felix's end-to-end packet tests (privileged): a node
// network namespace with pod namespaces wired the way Calico's CNI plugin
// wires them, felix's calculation, rendering and drivers programming the
// node namespace, and real TCP, UDP and ICMP traffic between the pods
// proving each policy's effect. Host endpoint tests add peer namespaces
// behind the node's eth1, eth2... and prove failsafe ports, applyOnForward,
// preDNAT (with a DNAT rule in the node's nat table), doNotTrack (no
// conntrack entry), "*" and expectedIPs-only host endpoints, and egress
// policy of DNAT'd host traffic.
package e2e
