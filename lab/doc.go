// Package lab runs a multi-node Tabby cluster on one machine, for people
// (tabby-lab) and for end-to-end tests: a real datastore (etcd, or the
// real kube-apiserver with Tabby's CRDs), node network namespaces on an
// underlay (one or two subnets behind a router namespace), each node's
// agent (see startAgent: the one seam with what runs on a node), pods
// wired by the real calico CNI plugin through libcni as a container
// runtime does, a TCP and UDP server in each pod (on the pod's own
// ports), policy applied and waited for until every node's felix reports
// it programmed (felix's endpoint report, see programmed.go), and a
// parallel probe of every pod pair on each port the target serves.
//
// Everything a lab makes is named with one prefix (State.Prefix): the
// namespaces /run/netns/<prefix>-*, and every process it starts carries
// TABBY_LAB_ID=<prefix> in its environment. Its files stay in the state
// folder. Down finds and removes all of it by the prefix, whatever state
// up left it in. The root namespace's network is never changed: links
// are made through netlink handles bound to the lab's namespaces, and
// agents program their node's namespace.
package lab
