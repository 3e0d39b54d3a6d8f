// Package wiring connects a pod's network namespace to its node the way
// Calico does: a veth pair whose host end (cali...) carries MAC
// ee:ee:ee:ee:ee:ee, proxy-ARP with no delay and no address; in the pod,
// eth0 with a /32 (/128), a link route to 169.254.1.1 and the default
// route through it (IPv6: through the host end's link-local address); on
// the node, a /32 (/128) route to the pod with metric 1024 and proto boot
// so BIRD's `learn` picks it up. Setup is all-or-nothing: on failure it
// removes what it made. The host end carries its attachment's ID as its
// alias (OwnerMark): Teardown removes only a host veth so marked (or an
// unmarked one whose peer is in the pod's namespace), never a link by
// name alone, and never touches the pod's namespace (removing the host end
// removes the pair). Teardown is idempotent. Check reports every way the
// live state differs from what Setup made.
//
// The node side lives in HostNS: the plugin's own namespace in production,
// a test's node namespace in tests.
package wiring

import (
	"crypto/sha1"
	"encoding/base32"
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

// HostVethNameForPodInterface names the host end of a Kubernetes pod's
// interface: HostVethName for eth0; for another interface Calico's
// multi-interface name, "calim<N>" + the first 9 base32 digits of
// sha1("<namespace>.<pod>"), where N is 1-9 for Multus's default names
// net1..net9 and 0 for any other name (whose digest then covers the
// interface name too, "<namespace>.<pod>.<ifName>"), so each interface
// of a pod has its own host end.
func HostVethNameForPodInterface(namespace, pod, ifName string) string {
	if ifName == "eth0" {
		return HostVethName(namespace, pod)
	}
	if len(ifName) == 4 && ifName[:3] == "net" && ifName[3] >= '1' && ifName[3] <= '9' {
		return base32Name("calim"+ifName[3:], namespace+"."+pod)
	}
	return base32Name("calim0", namespace+"."+pod+"."+ifName)
}

func base32Name(prefix, s string) string {
	sum := sha1.Sum([]byte(s))
	return prefix + base32.StdEncoding.EncodeToString(sum[:])[:9]
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

// ifAliasMax is the longest interface alias the kernel keeps (IFALIASZ
// less the terminating NUL).
const ifAliasMax = 255

// OwnerMark is the alias that marks a host veth as an attachment's: the
// attachment's ID itself, or, when that is longer than an alias can be,
// a digest of it.
func OwnerMark(owner string) string {
	if len(owner) <= ifAliasMax {
		return owner
	}
	sum := sha1.Sum([]byte(owner))
	return "tabby-sha1-" + hex.EncodeToString(sum[:])
}
