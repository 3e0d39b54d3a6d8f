package routes

import (
	"net/netip"
	"testing"

	"github.com/tabbynet/tabby/felix/wireguard"
)

func TestPodMTU(t *testing.T) {
	ifaces := map[string]int{"lo": 65536, "eth0": 1500, "ens5": 9001, "cali123": 1450, "vxlan.calico": 1450, "docker0": 1400}
	for _, tc := range []struct {
		name string
		d    Desired
		want int
	}{
		{"no encapsulation", Desired{}, 1500},
		{"IPIP", Desired{IPIP: netip.MustParseAddr("10.0.0.1")}, 1480},
		{"VXLAN", Desired{VXLAN: &VTEP{}}, 1450},
		{"VXLAN v4 and v6", Desired{VXLAN: &VTEP{}, VXLANv6: &VTEP{}}, 1430},
		{"VXLAN and WireGuard", Desired{VXLAN: &VTEP{}, Wireguard: [2]wireguard.Desired{{Config: wireguard.Config{Enabled: true}}}}, 1440},
		{"WireGuard v6", Desired{Wireguard: [2]wireguard.Desired{{}, {Config: wireguard.Config{Enabled: true, V6: true}}}}, 1420},
	} {
		if got, ok := PodMTU(ifaces, DefaultMTUIfacePattern, tc.d); !ok || got != tc.want {
			t.Errorf("%s: PodMTU = %d, %v; want %d", tc.name, got, ok, tc.want)
		}
	}
	if _, ok := PodMTU(map[string]int{"lo": 65536, "cali1": 1500}, DefaultMTUIfacePattern, Desired{}); ok {
		t.Error("an MTU without any matching interface")
	}
}
