package v3

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// validate checks a BGPPeerSpec as Calico's v3 validator and CRD rules do.
func (s *BGPPeerSpec) validate(p Path) ErrorList {
	var errs ErrorList

	if s.Node != "" {
		netCheckResourceName(p.Child("node"), s.Node, &errs)
	}
	errs.Extend(validateSelector(p.Child("nodeSelector"), s.NodeSelector))
	errs.Extend(validateSelector(p.Child("peerSelector"), s.PeerSelector))
	errs.Extend(validateSelector(p.Child("localWorkloadSelector"), s.LocalWorkloadSelector))

	// Which nodes peer: node or nodeSelector, not both.
	if s.Node != "" && s.NodeSelector != "" {
		errs.Add(p.Child("node"), "node and nodeSelector cannot both be set: use one to choose the nodes that peer")
	}
	// With whom: peerIP, peerSelector or localWorkloadSelector.
	if s.PeerIP != "" && s.PeerSelector != "" {
		errs.Add(p.Child("peerIP"), "peerIP and peerSelector cannot both be set: peer with an address or with selected nodes")
	}
	if s.PeerSelector != "" && s.ASNumber != 0 {
		errs.Add(p.Child("asNumber"), "must be empty when peerSelector is set: the selected nodes' own AS numbers are used")
	}
	if s.LocalWorkloadSelector != "" {
		if s.PeerIP != "" {
			errs.Add(p.Child("peerIP"), "must be empty when localWorkloadSelector is set")
		}
		if s.PeerSelector != "" {
			errs.Add(p.Child("peerSelector"), "must be empty when localWorkloadSelector is set")
		}
		if s.ASNumber == 0 {
			errs.Add(p.Child("asNumber"), "is required when localWorkloadSelector is set: give the workloads' AS number")
		}
	}

	peerVersion := 0
	if s.PeerIP != "" {
		ip, err := netParsePeerIP(s.PeerIP)
		if err != nil {
			errs.Add(p.Child("peerIP"), err.Error())
		} else {
			peerVersion = 4
			if ip.To4() == nil {
				peerVersion = 6
			}
		}
	}
	if s.ReachableBy != "" {
		rb := p.Child("reachableBy")
		v := netIPVersion(s.ReachableBy)
		switch {
		case s.PeerIP == "":
			errs.Add(rb, "must be empty when peerIP is empty: it is the gateway towards peerIP")
		case v == 0:
			errs.Addf(rb, "%q is not a valid IP address", s.ReachableBy)
		case peerVersion != 0 && v != peerVersion:
			errs.Addf(rb, "%s is IPv%d but peerIP %s is IPv%d: use a gateway of the peer's IP version", s.ReachableBy, v, s.PeerIP, peerVersion)
		}
	}

	if s.KeepOriginalNextHop && s.NextHopMode != nil {
		errs.Add(p.Child("keepOriginalNextHop"), "keepOriginalNextHop and nextHopMode cannot both be set; keepOriginalNextHop is deprecated, use nextHopMode: Keep")
	}
	if m := s.NextHopMode; m != nil {
		if *m == "" {
			errs.Add(p.Child("nextHopMode"), "is empty: use Auto, Self or Keep")
		}
		oneOf(p.Child("nextHopMode"), string(*m), &errs, string(NextHopModeAuto), string(NextHopModeSelf), string(NextHopModeKeep))
	}
	oneOf(p.Child("sourceAddress"), string(s.SourceAddress), &errs, string(SourceAddressUseNodeIP), string(SourceAddressNone))
	if r := s.ReversePeering; r != nil {
		if *r == "" {
			errs.Add(p.Child("reversePeering"), "is empty: use Auto or Manual")
		}
		oneOf(p.Child("reversePeering"), string(*r), &errs, string(ReversePeeringAuto), string(ReversePeeringManual))
	}

	netCheckBGPPassword(p.Child("password"), s.Password, &errs)
	netCheckDuration(p.Child("maxRestartTime"), s.MaxRestartTime, &errs)
	netCheckDuration(p.Child("keepaliveTime"), s.KeepaliveTime, &errs)
	if n := s.NumAllowedLocalASNumbers; n != nil && *n < 0 {
		errs.Addf(p.Child("numAllowedLocalASNumbers"), "%d is negative: use 0 or more", *n)
	}
	for i, f := range s.Filters {
		netCheckResourceName(p.Child("filters").Index(i), f, &errs)
	}
	return errs
}

// netParsePeerIP parses a BGPPeer peerIP: <IPv4>, <IPv6>, <IPv4>:<port> or
// [<IPv6>]:<port>, the port being 1-65535.
func netParsePeerIP(s string) (net.IP, error) {
	bad := func(why string) error {
		msg := fmt.Sprintf("%q is not an IP address, <IPv4>:<port> or [<IPv6>]:<port>", s)
		if why != "" {
			msg += ": " + why
		}
		return errors.New(msg)
	}
	if ip := net.ParseIP(s); ip != nil {
		return ip, nil
	}
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return nil, bad("")
	}
	ip := net.ParseIP(host)
	if ip == nil {
		return nil, bad("")
	}
	if ip.To4() == nil && !strings.HasPrefix(s, "[") {
		return nil, bad("write an IPv6 address with a port as [<IPv6>]:<port>")
	}
	if ip.To4() != nil && strings.HasPrefix(s, "[") {
		return nil, bad("write an IPv4 address with a port as <IPv4>:<port>")
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return nil, bad("the port must be 1-65535")
	}
	return ip, nil
}
