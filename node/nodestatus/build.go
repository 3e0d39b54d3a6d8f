package nodestatus

import (
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/node/birdctl"
)

// Snapshot is what BIRD said; Err set means it did not answer (status
// then as Calico's without BIRD: agent NotReady, no peers, no routes).
type Snapshot struct {
	Err       error
	Status    birdctl.Status
	Peers     []birdctl.Peer
	Protocols map[string]string // name -> type
	Routes    []birdctl.Route
}

// Build computes the status of the classes asked for (LastUpdated left
// zero). Classes it does not know (stored data validation would refuse)
// give nothing; UnknownClasses names them for the reporter to warn of.
func Build(classes []v3.NodeStatusClassType, s Snapshot) v3.CalicoNodeStatusStatus {
	var out v3.CalicoNodeStatusStatus
	for _, c := range classes {
		switch c {
		case v3.NodeStatusClassTypeAgent:
			d := v3.BGPDaemonStatus{State: v3.BGPDaemonStateNotReady}
			if s.Err == nil {
				d = v3.BGPDaemonStatus{State: v3.BGPDaemonStateReady, Version: s.Status.Version, RouterID: s.Status.RouterID,
					LastBootTime: s.Status.LastBoot, LastReconfigurationTime: s.Status.LastReconfiguration}
			}
			out.Agent = v3.CalicoNodeAgentStatus{BIRDV4: d, BIRDV6: d}
		case v3.NodeStatusClassTypeBGP:
			if s.Err != nil {
				continue
			}
			b := &out.BGP
			for _, p := range s.Peers {
				cp := v3.CalicoNodePeer{PeerIP: p.PeerIP.String(), Type: peerType(p.Name), State: v3.BGPSessionState(p.BGPState), Since: p.Since}
				up := p.State == "up"
				if p.PeerIP.Is4() {
					b.PeersV4 = append(b.PeersV4, cp)
					count(up, &b.NumberEstablishedV4, &b.NumberNotEstablishedV4)
				} else {
					b.PeersV6 = append(b.PeersV6, cp)
					count(up, &b.NumberEstablishedV6, &b.NumberNotEstablishedV6)
				}
			}
		case v3.NodeStatusClassTypeRoutes:
			if s.Err != nil {
				continue
			}
			for _, r := range s.Routes {
				cr := v3.CalicoNodeRoute{Type: v3.RouteTypeRIB, Destination: r.Destination, Gateway: r.Gateway, Interface: r.Interface,
					LearnedFrom: learnedFrom(r.Protocol, s.Protocols[r.Protocol])}
				if r.Primary {
					cr.Type = v3.RouteTypeFIB
				}
				if cr.Interface == "" && r.Type != "unicast" {
					cr.Interface = r.Type // blackhole, unreachable: as Calico reports them
				}
				if strings.Contains(r.Destination, ":") {
					out.Routes.RoutesV6 = append(out.Routes.RoutesV6, cr)
				} else {
					out.Routes.RoutesV4 = append(out.Routes.RoutesV4, cr)
				}
			}
		}
	}
	return out
}

func count(up bool, established, not *int) {
	if up {
		*established++
	} else {
		*not++
	}
}

func peerType(name string) v3.BGPPeerType {
	switch {
	case strings.HasPrefix(name, "Mesh_"):
		return v3.BGPPeerTypeNodeMesh
	case strings.HasPrefix(name, "Node_"):
		return v3.BGPPeerTypeNodePeer
	}
	return v3.BGPPeerTypeGlobalPeer
}

// learnedFrom is where a route came from, by the type of the BIRD
// protocol that gave it (confd names them tabby_kernel4, tabby_blocks4,
// Mesh_<ip>...).
func learnedFrom(proto, typ string) v3.CalicoNodeRouteLearnedFrom {
	switch typ {
	case "Kernel":
		return v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeKernel}
	case "Static":
		return v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeStatic}
	case "Direct":
		return v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeDirect}
	}
	lf := v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeBGPPeer}
	if strings.HasPrefix(proto, "Mesh_") {
		lf.SourceType = v3.RouteSourceTypeNodeMesh
	}
	if ip, ok := birdctl.PeerIPOfProtocol(proto); ok {
		lf.PeerIP = ip.String()
	}
	return lf
}

// UnknownClasses are the classes of classes Build does not know.
func UnknownClasses(classes []v3.NodeStatusClassType) []v3.NodeStatusClassType {
	var out []v3.NodeStatusClassType
	for _, c := range classes {
		switch c {
		case v3.NodeStatusClassTypeAgent, v3.NodeStatusClassTypeBGP, v3.NodeStatusClassTypeRoutes:
		default:
			out = append(out, c)
		}
	}
	return out
}
