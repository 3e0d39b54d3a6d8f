package v3

import (
	"net"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// polDSCPNames are the DSCP names Calico accepts, with their values.
var polDSCPNames = map[string]int{
	"DF": 0, "EF": 46,
	"AF11": 10, "AF12": 12, "AF13": 14,
	"AF21": 18, "AF22": 20, "AF23": 22,
	"AF31": 26, "AF32": 28, "AF33": 30,
	"AF41": 34, "AF42": 36, "AF43": 38,
	"CS0": 0, "CS1": 8, "CS2": 16, "CS3": 24, "CS4": 32, "CS5": 40, "CS6": 48,
}

// Validate implements Resource.
func (w *WorkloadEndpoint) Validate() ErrorList {
	errs := validateMeta(&w.ObjectMeta, true)
	s := &w.Spec
	sp := Path("spec")

	for _, f := range []struct{ name, v string }{
		{"orchestrator", s.Orchestrator},
		{"workload", s.Workload},
		{"node", s.Node},
		{"pod", s.Pod},
		{"endpoint", s.Endpoint},
		{"serviceAccountName", s.ServiceAccountName},
	} {
		if f.v != "" {
			polCheckName(sp.Child(f.name), f.v, &errs)
		}
	}
	if s.ContainerID != "" && !polContainerIDRE().MatchString(s.ContainerID) {
		errs.Addf(sp.Child("containerID"), "%q is not a container ID: use letters, digits and '-', starting and ending with a letter or digit", s.ContainerID)
	}

	// Calico requires the host-side interface name (its "interface" rule
	// has no omitempty).
	if s.InterfaceName == "" {
		errs.Add(sp.Child("interfaceName"), "is required: name the host side of the endpoint's interface")
	} else if s.InterfaceName == "*" || !polInterfaceRE().MatchString(s.InterfaceName) {
		errs.Addf(sp.Child("interfaceName"), "%q is not an interface name: use 1-15 of letters, digits, '_', '.' and '-'", s.InterfaceName)
	}
	if s.MAC != "" {
		if _, err := net.ParseMAC(s.MAC); err != nil {
			errs.Addf(sp.Child("mac"), "%q is not a MAC address (e.g. \"ee:ee:ee:ee:ee:ee\")", s.MAC)
		}
	}

	var networks []*net.IPNet
	for i, n := range s.IPNetworks {
		p := sp.Child("ipNetworks").Index(i)
		if polParseNet(p, n, &errs) == 0 {
			continue
		}
		ipn := polMustNet(n)
		if ones, bits := ipn.Mask.Size(); ones != bits {
			errs.Addf(p, "%q holds more than one address: use a /32 (IPv4) or /128 (IPv6)", n)
			continue
		}
		networks = append(networks, ipn)
	}
	for i, nat := range s.IPNATs {
		p := sp.Child("ipNATs").Index(i)
		iv := validateIP(p.Child("internalIP"), nat.InternalIP, &errs)
		ev := validateIP(p.Child("externalIP"), nat.ExternalIP, &errs)
		if iv != 0 && ev != 0 && iv != ev {
			errs.Addf(p.Child("externalIP"), "%q is IPv%d but internalIP %q is IPv%d: a NAT maps addresses of one version", nat.ExternalIP, ev, nat.InternalIP, iv)
		}
		if iv != 0 && !polNetsContain(networks, net.ParseIP(nat.InternalIP)) {
			errs.Addf(p.Child("internalIP"), "%q is not one of the endpoint's ipNetworks", nat.InternalIP)
		}
	}
	if s.IPv4Gateway != "" {
		if v := validateIP(sp.Child("ipv4Gateway"), s.IPv4Gateway, &errs); v == 6 {
			errs.Addf(sp.Child("ipv4Gateway"), "%q is an IPv6 address", s.IPv4Gateway)
		}
	}
	if s.IPv6Gateway != "" {
		if v := validateIP(sp.Child("ipv6Gateway"), s.IPv6Gateway, &errs); v == 4 {
			errs.Addf(sp.Child("ipv6Gateway"), "%q is an IPv4 address", s.IPv6Gateway)
		}
	}
	for i, prof := range s.Profiles {
		polCheckName(sp.Child("profiles").Index(i), prof, &errs)
	}
	for i := range s.Ports {
		port := &s.Ports[i]
		p := sp.Child("ports").Index(i)
		if port.Name != "" {
			polCheckPortName(p.Child("name"), port.Name, &errs)
		} else if port.HostPort == 0 {
			errs.Add(p.Child("name"), "is required unless the port maps a hostPort")
		}
		polCheckEndpointProtocol(p.Child("protocol"), port.Protocol, &errs)
		if port.Port == 0 {
			errs.Add(p.Child("port"), "is required: use 1-65535")
		}
		if port.HostIP != "" {
			polParseNet(p.Child("hostIP"), port.HostIP, &errs)
		}
	}
	for i, c := range s.AllowSpoofedSourcePrefixes {
		validateCIDR(sp.Child("allowSpoofedSourcePrefixes").Index(i), c, &errs)
	}
	if s.QoSControls != nil {
		s.QoSControls.validate(sp.Child("qosControls"), &errs)
	}
	return errs
}

// polMustNet parses a CIDR or bare IP already checked by polParseNet.
func polMustNet(s string) *net.IPNet {
	n, _, _ := parseCIDR(s)
	return n
}

func polNetsContain(nets []*net.IPNet, ip net.IP) bool {
	for _, n := range nets {
		if n.Contains(ip) {
			return true
		}
	}
	return false
}

// validate checks each limit against the range Calico documents for it.
func (q *QoSControls) validate(p Path, errs *ErrorList) {
	for _, l := range []struct {
		name     string
		v        int64
		min, max int64
	}{
		{"ingressBandwidth", q.IngressBandwidth, 1000, 1e15},
		{"ingressBurst", q.IngressBurst, 1000, 34359738360},
		{"ingressPeakrate", q.IngressPeakrate, 1010, 1.01e15},
		{"ingressMinburst", q.IngressMinburst, 1000, 1e8},
		{"egressBandwidth", q.EgressBandwidth, 1000, 1e15},
		{"egressBurst", q.EgressBurst, 1000, 34359738360},
		{"egressPeakrate", q.EgressPeakrate, 1010, 1.01e15},
		{"egressMinburst", q.EgressMinburst, 1000, 1e8},
		{"ingressPacketRate", q.IngressPacketRate, 1, 1e4},
		{"ingressPacketBurst", q.IngressPacketBurst, 1, 1e4},
		{"egressPacketRate", q.EgressPacketRate, 1, 1e4},
		{"egressPacketBurst", q.EgressPacketBurst, 1, 1e4},
		{"ingressMaxConnections", q.IngressMaxConnections, 1, 4294967295},
		{"egressMaxConnections", q.EgressMaxConnections, 1, 4294967295},
	} {
		if l.v != 0 && (l.v < l.min || l.v > l.max) {
			errs.Addf(p.Child(l.name), "%d is outside %d-%d (or 0 for no limit)", l.v, l.min, l.max)
		}
	}
	if d := q.DSCP; d != nil {
		polCheckDSCP(p.Child("dscp"), *d, errs)
	}
}

// polCheckDSCP checks a DSCP value: a number 0-63 (also as a string) or
// one of Calico's DSCP names in any case.
func polCheckDSCP(p Path, d intstr.IntOrString, errs *ErrorList) {
	switch d.Type {
	case intstr.Int:
		if d.IntVal < 0 || d.IntVal > 63 {
			errs.Addf(p, "%d is outside 0-63", d.IntVal)
		}
	default:
		if n, err := strconv.Atoi(d.StrVal); err == nil {
			if n < 0 || n > 63 {
				errs.Addf(p, "%d is outside 0-63", n)
			}
		} else if _, ok := polDSCPNames[strings.ToUpper(strings.TrimSpace(d.StrVal))]; !ok {
			errs.Addf(p, "%q is not a DSCP value: use 0-63 or DF, EF, AF11-AF43, CS0-CS6", d.StrVal)
		}
	}
}
