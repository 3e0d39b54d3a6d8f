package calc

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/netip"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// A services match selects the current endpoints of a Kubernetes Service,
// as Calico's felix does (felix/calc/rule_scanner.go and
// felix/serviceindex in Calico): in a rule's destination, a hash:ip,port
// set of every endpoint address with every port of its EndpointSlice
// (protocol TCP unless the port says UDP or SCTP; a port without a number
// gives nothing); in a rule's source, a hash:net set of the addresses
// alone. Every endpoint of a slice counts, ready or not, and an address
// that is not an IP (an FQDN slice) gives nothing. The sets' IDs are
// Calico's: "svc:" and "svcnoport:" with the base64url SHA-224 of
// "<prefix>:<namespace>/<name>", so the kernel's set names are Calico's.

// ruleSide is the side of a rule an entity match is on.
type ruleSide bool

const (
	srcSide ruleSide = false
	dstSide ruleSide = true
)

// serviceMatch registers the set of the service m names (in namespace ns
// when m names none) and returns its ID.
func serviceMatch(m *v3.ServiceMatch, ns string, side ruleSide, svc bool, demands map[string]*demand) (string, error) {
	name := m.Namespace + "/" + m.Name
	if m.Namespace == "" {
		name = ns + "/" + m.Name
	}
	switch {
	case !svc:
		return "", fmt.Errorf("services match (service %s): felix follows Kubernetes Services only on the Kubernetes datastore, as Calico's", name)
	case m.Name == "" || name[0] == '/':
		return "", fmt.Errorf("services match %q needs a name and a namespace", name)
	}
	d := &demand{id: ServiceSetID(side == dstSide, name), typ: HashNet, service: name}
	if side == dstSide {
		d.typ = HashIPPort
	}
	demands[d.id] = d
	return d.id, nil
}

// ServiceSetID is the ID of the set of Service service's ("<namespace>/
// <name>") endpoints, with their ports or not: Calico's
// hash.MakeUniqueID("svc" or "svcnoport", service), the prefix, ':' and
// the base64url SHA-224 of prefix:service.
func ServiceSetID(withPorts bool, service string) string {
	prefix := "svcnoport"
	if withPorts {
		prefix = "svc"
	}
	sum := sha256.Sum224([]byte(prefix + ":" + service))
	return prefix + ":" + base64.RawURLEncoding.EncodeToString(sum[:])
}

// appendSliceMembers appends the members EndpointSlice s gives to the
// service set d.
func appendSliceMembers(dst []string, d *demand, s *v3.KubernetesEndpointSlice) []string {
	if d.typ == HashNet {
		for _, ep := range s.Endpoints {
			for _, a := range ep.Addresses {
				if p, ok := sliceNet(a); ok {
					dst = append(dst, p.String())
				}
			}
		}
		return dst
	}
	var buf []byte
	for _, ep := range s.Endpoints {
		for _, port := range s.Ports {
			if port.Port == nil {
				continue
			}
			proto := "tcp"
			if port.Protocol != nil {
				switch *port.Protocol {
				case corev1.ProtocolUDP:
					proto = "udp"
				case corev1.ProtocolSCTP:
					proto = "sctp"
				}
			}
			for _, a := range ep.Addresses {
				ip, err := netip.ParseAddr(a)
				if err != nil || ip.Zone() != "" {
					continue
				}
				buf = ip.Unmap().AppendTo(buf[:0])
				buf = append(append(append(buf, ','), proto...), ':')
				dst = append(dst, string(strconv.AppendUint(buf, uint64(uint16(*port.Port)), 10)))
			}
		}
	}
	return dst
}

// sliceNet reads an endpoint address as Calico's ParseCIDROrIP: an IP
// (as a /32 or /128) or a CIDR.
func sliceNet(a string) (netip.Prefix, bool) {
	if ip, err := netip.ParseAddr(a); err == nil {
		if ip.Zone() != "" {
			return netip.Prefix{}, false
		}
		ip = ip.Unmap()
		return netip.PrefixFrom(ip, ip.BitLen()), true
	}
	p, err := netip.ParsePrefix(a)
	if err != nil {
		return netip.Prefix{}, false
	}
	return p.Masked(), true
}
