package nodestatus

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/node/birdctl"
)

func TestBuild(t *testing.T) {
	snap := Snapshot{
		Status: birdctl.Status{Version: "2.0.12", RouterID: "10.0.0.1", LastBoot: "2026-12-02 00:23:02.095", LastReconfiguration: "2026-12-02 00:23:03.000", Up: true},
		Peers: []birdctl.Peer{
			{Name: "Mesh_10_0_0_2", PeerIP: netip.MustParseAddr("10.0.0.2"), State: "up", Since: "2026-12-02 00:23:02", BGPState: "Established"},
			{Name: "Node_10_0_0_9", PeerIP: netip.MustParseAddr("10.0.0.9"), State: "start", Since: "2026-12-02 00:23:02", BGPState: "Active"},
			{Name: "Global_fd00__9", PeerIP: netip.MustParseAddr("fd00::9"), State: "up", Since: "2026-12-02 00:23:02", BGPState: "Established"},
		},
		Protocols: map[string]string{"tabby_blocks4": "Static", "tabby_kernel4": "Kernel", "tabby_direct4": "Direct", "Mesh_10_0_0_2": "BGP"},
		Routes: []birdctl.Route{
			{Destination: "10.244.1.0/26", Type: "blackhole", Protocol: "tabby_blocks4", Gateway: "N/A", Primary: true},
			{Destination: "10.244.2.0/26", Type: "unicast", Protocol: "Mesh_10_0_0_2", Gateway: "10.0.0.2", Interface: "eth0", Primary: true},
			{Destination: "10.0.0.0/24", Type: "unicast", Protocol: "tabby_direct4", Gateway: "N/A", Interface: "eth0"},
			{Destination: "fd00:1::/122", Type: "unicast", Protocol: "Global_fd00__9", Gateway: "fd00::9", Interface: "eth0", Primary: true},
		},
	}
	got := Build([]v3.NodeStatusClassType{v3.NodeStatusClassTypeAgent, v3.NodeStatusClassTypeBGP, v3.NodeStatusClassTypeRoutes}, snap)
	bird := v3.BGPDaemonStatus{State: v3.BGPDaemonStateReady, Version: "2.0.12", RouterID: "10.0.0.1",
		LastBootTime: "2026-12-02 00:23:02.095", LastReconfigurationTime: "2026-12-02 00:23:03.000"}
	want := v3.CalicoNodeStatusStatus{
		Agent: v3.CalicoNodeAgentStatus{BIRDV4: bird, BIRDV6: bird},
		BGP: v3.CalicoNodeBGPStatus{NumberEstablishedV4: 1, NumberNotEstablishedV4: 1, NumberEstablishedV6: 1,
			PeersV4: []v3.CalicoNodePeer{
				{PeerIP: "10.0.0.2", Type: v3.BGPPeerTypeNodeMesh, State: v3.BGPSessionStateEstablished, Since: "2026-12-02 00:23:02"},
				{PeerIP: "10.0.0.9", Type: v3.BGPPeerTypeNodePeer, State: v3.BGPSessionStateActive, Since: "2026-12-02 00:23:02"},
			},
			PeersV6: []v3.CalicoNodePeer{{PeerIP: "fd00::9", Type: v3.BGPPeerTypeGlobalPeer, State: v3.BGPSessionStateEstablished, Since: "2026-12-02 00:23:02"}},
		},
		Routes: v3.CalicoNodeBGPRouteStatus{
			RoutesV4: []v3.CalicoNodeRoute{
				{Type: v3.RouteTypeFIB, Destination: "10.244.1.0/26", Gateway: "N/A", Interface: "blackhole", LearnedFrom: v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeStatic}},
				{Type: v3.RouteTypeFIB, Destination: "10.244.2.0/26", Gateway: "10.0.0.2", Interface: "eth0", LearnedFrom: v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeNodeMesh, PeerIP: "10.0.0.2"}},
				{Type: v3.RouteTypeRIB, Destination: "10.0.0.0/24", Gateway: "N/A", Interface: "eth0", LearnedFrom: v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeDirect}},
			},
			RoutesV6: []v3.CalicoNodeRoute{
				{Type: v3.RouteTypeFIB, Destination: "fd00:1::/122", Gateway: "fd00::9", Interface: "eth0", LearnedFrom: v3.CalicoNodeRouteLearnedFrom{SourceType: v3.RouteSourceTypeBGPPeer, PeerIP: "fd00::9"}},
			},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
	// Only the classes asked for.
	if got := Build([]v3.NodeStatusClassType{v3.NodeStatusClassTypeBGP}, snap); got.Agent != (v3.CalicoNodeAgentStatus{}) || got.Routes.RoutesV4 != nil {
		t.Errorf("classes not asked for were filled: %+v", got)
	}
	// BIRD not answering.
	down := Build([]v3.NodeStatusClassType{v3.NodeStatusClassTypeAgent, v3.NodeStatusClassTypeBGP}, Snapshot{Err: errors.New("no socket")})
	if down.Agent.BIRDV4.State != v3.BGPDaemonStateNotReady || down.BGP.PeersV4 != nil {
		t.Errorf("without BIRD: %+v", down)
	}
}

// TestUnknownClasses: a class Calico does not have (stored past
// validation) is named, so the reporter warns instead of leaving it out
// silently.
func TestUnknownClasses(t *testing.T) {
	got := UnknownClasses([]v3.NodeStatusClassType{v3.NodeStatusClassTypeAgent, "Flows", v3.NodeStatusClassTypeRoutes, "bgp"})
	if diff := cmp.Diff([]v3.NodeStatusClassType{"Flows", "bgp"}, got); diff != "" {
		t.Fatalf("unknown classes (-want +got):\n%s", diff)
	}
	if got := UnknownClasses([]v3.NodeStatusClassType{v3.NodeStatusClassTypeBGP}); len(got) != 0 {
		t.Fatalf("BGP reported unknown: %v", got)
	}
}
