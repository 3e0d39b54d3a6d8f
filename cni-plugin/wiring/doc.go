// Package wiring connects a pod's network namespace to its node the way
// Calico does: a veth pair whose host end (cali...) carries MAC
// ee:ee:ee:ee:ee:ee, proxy-ARP with no delay and no address; in the pod,
// eth0 with a /32 (/128), a link route to 169.254.1.1 and the default
// route through it (IPv6: through the host end's link-local address); on
// the node, a /32 (/128) route to the pod with metric 1024 and proto boot
// so BIRD's `learn` picks it up. Setup is all-or-nothing: on failure it
// removes what it made. Teardown is idempotent. Check reports every way
// the live state differs from what Setup made.
//
// The node side lives in HostNS: the plugin's own namespace in production,
// a test's node namespace in tests.
package wiring

import (
	"crypto/sha1"
	"encoding/hex"
	"net"
)

// HostMAC is the MAC of every host-side veth (Calico's).
const HostMAC = "ee:ee:ee:ee:ee:ee"

// GatewayIPv4 is the pod's IPv4 next hop, answered by proxy-ARP.
var GatewayIPv4 = net.IPv4(169, 254, 1, 1)

// HostLinkLocalIPv6 is the host end's link-local address (EUI-64 of
// HostMAC), the pod's IPv6 next hop.
var HostLinkLocalIPv6 = net.ParseIP("fe80::ecee:eeff:feee:eeee")

// RouteMetric is the metric of host routes to pods.
const RouteMetric = 1024

// HostVethName returns Calico's host-side interface name for a pod:
// "cali" + the first 11 hex digits of sha1("<namespace>.<pod>").
func HostVethName(namespace, pod string) string {
	return hashName("cali", namespace+"."+pod)
}

// HostVethNameForContainer names the host end of a non-Kubernetes
// workload from its full container ID and interface, so short or
// prefix-sharing IDs cannot collide.
func HostVethNameForContainer(containerID, ifName string) string {
	return hashName("cali", containerID+"."+ifName)
}

func hashName(prefix, s string) string {
	sum := sha1.Sum([]byte(s))
	return prefix + hex.EncodeToString(sum[:])[:11]
}
