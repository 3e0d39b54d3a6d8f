package birdctl

import (
	"bufio"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func reply(t *testing.T, raw string) []Line {
	t.Helper()
	lines, err := readReply(bufio.NewReader(strings.NewReader(raw)))
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// Replies captured from BIRD 2.0.12 on its control socket.
const (
	protocolsReply = "2002-Name       Proto      Table      State  Since         Info\n" +
		"1002-device1    Device     ---        up     2026-12-02 00:23:02  \n" +
		" k4         Kernel     master4    up     2026-12-02 00:23:02  \n" +
		" Mesh_10_9_0_2 BGP        ---        up     2026-12-02 00:23:02  Established   \n" +
		" Mesh_fd00_30_1__11 BGP        ---        start  2026-12-02 00:23:18  Active        Socket: Connection refused\n" +
		" Node_10_9_0_7_port_1790 BGP        ---        start  2026-12-02 00:23:18  Connect\n" +
		" Global_10_9_0_8 BGP        ---        up     2026-12-02 00:23:18  Established\n" +
		" other BGP        ---        up     2026-12-02 00:23:18  Established\n" +
		"0000 \n"
	statusReply = "1000-BIRD 2.0.12\n1011-Router ID is 10.9.0.1\n Hostname is vm\n Current server time is 2026-12-02 00:23:08.238\n" +
		" Last reboot on 2026-12-02 00:23:02.095\n Last reconfiguration on 2026-12-02 00:23:02.095\n0013 Daemon is up and running\n"
	grStatusReply = "1000-BIRD 2.0.12\n1011-Router ID is 10.9.0.1\n Last reboot on 2026-12-02 00:23:13.674\n" +
		"0024-Graceful restart recovery in progress\n  Waiting for 1 channels to recover\n  Wait timer is 239.491/240\n0013 Daemon is up and running\n"
	routeReply = "1007-Table master4:\n 10.244.1.0/26        blackhole [s4 00:23:02.095] * (200)\n" +
		" 10.244.2.0/26        unicast [Mesh_10_9_0_2 00:23:03.047] * (100) [i]\n \tvia 10.9.0.2 on va\n" +
		"                      unicast [Mesh_10_9_0_3 00:23:03.047] (100) [i]\n \tvia 10.9.0.3 on va\n" +
		" 10.9.0.0/24          unicast [direct1 00:23:02.095] ! (240)\n \tdev va\n0000 \n"
)

func TestPeers(t *testing.T) {
	got := Peers(reply(t, protocolsReply))
	want := []Peer{
		{Name: "Mesh_10_9_0_2", PeerIP: netip.MustParseAddr("10.9.0.2"), Type: "node-to-node mesh", State: "up", Since: "2026-12-02 00:23:02", BGPState: "Established"},
		{Name: "Mesh_fd00_30_1__11", PeerIP: netip.MustParseAddr("fd00:30:1::11"), Type: "node-to-node mesh", State: "start", Since: "2026-12-02 00:23:18", BGPState: "Active", Info: "Socket: Connection refused"},
		{Name: "Node_10_9_0_7_port_1790", PeerIP: netip.MustParseAddr("10.9.0.7"), Type: "node specific", State: "start", Since: "2026-12-02 00:23:18", BGPState: "Connect"},
		{Name: "Global_10_9_0_8", PeerIP: netip.MustParseAddr("10.9.0.8"), Type: "global", State: "up", Since: "2026-12-02 00:23:18", BGPState: "Established"},
	}
	if d := cmp.Diff(want, got, cmp.Comparer(func(a, b netip.Addr) bool { return a == b })); d != "" {
		t.Error(d)
	}
}

func TestParseStatus(t *testing.T) {
	got := ParseStatus(reply(t, statusReply))
	want := Status{Version: "2.0.12", RouterID: "10.9.0.1", LastBoot: "2026-12-02 00:23:02.095", LastReconfiguration: "2026-12-02 00:23:02.095", Up: true}
	if got != want {
		t.Errorf("got %+v, want %+v", got, want)
	}
	if gr := ParseStatus(reply(t, grStatusReply)); !gr.GracefulRestart || !gr.Up {
		t.Errorf("graceful restart not seen: %+v", gr)
	}
}

func TestParseRoutes(t *testing.T) {
	got := ParseRoutes(reply(t, routeReply))
	want := []Route{
		{Destination: "10.244.1.0/26", Type: "blackhole", Protocol: "s4", Gateway: "N/A", Primary: true},
		{Destination: "10.244.2.0/26", Type: "unicast", Protocol: "Mesh_10_9_0_2", Gateway: "10.9.0.2", Interface: "va", Primary: true},
		{Destination: "10.244.2.0/26", Type: "unicast", Protocol: "Mesh_10_9_0_3", Gateway: "10.9.0.3", Interface: "va"},
		{Destination: "10.9.0.0/24", Type: "unicast", Protocol: "direct1", Gateway: "N/A", Interface: "va"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Error(d)
	}
}

func TestParseLine(t *testing.T) {
	for _, bad := range []string{"", "abc", "12345", "1002x"} {
		if _, _, ok := parseLine(bad); ok {
			t.Errorf("%q accepted", bad)
		}
	}
}
