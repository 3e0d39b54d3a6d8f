// Package registration is what a node agent calls at start (and when its
// addresses change) to register the node in the datastore, as calico-node
// does: it chooses the node's IPv4/IPv6 addresses by one of Calico's
// autodetection methods (autodetect.go: a pure chooser over the node's
// interfaces; interfaces_linux.go: the netlink edge listing them),
// creates or updates the Node resource with them (register.go), and
// allocates the tunnel addresses the IP pools need through IPAM, under
// Calico's handles, recording them on the Node where Calico records them
// (tunnels.go); addresses no pool needs any more are released.
package registration
