package v3

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestParsePeerIP(t *testing.T) {
	tests := []struct {
		in   string
		ok   bool
		want string // error substring when !ok
	}{
		{"10.0.0.1", true, ""},
		{"10.0.0.1:179", true, ""},
		{"fd00::1", true, ""},
		{"[fd00::1]:1179", true, ""},
		{"10.0.0.1:0", false, "the port must be 1-65535"},
		{"10.0.0.1:65536", false, "the port must be 1-65535"},
		{"[10.0.0.1]:179", false, "write an IPv4 address with a port as <IPv4>:<port>"},
		{"[fd00::1]", false, "is not an IP address"},
		{"router.example.com:179", false, "is not an IP address"},
		{"10.0.0.0/24", false, "is not an IP address"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			_, err := netParsePeerIP(tc.in)
			if tc.ok != (err == nil) {
				t.Fatalf("netParsePeerIP(%q) = %v, want ok=%v", tc.in, err, tc.ok)
			}
			if err != nil && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not contain %q", err, tc.want)
			}
		})
	}
}

func TestBGPPeerValidate(t *testing.T) {
	self := NextHopModeSelf
	tests := []struct {
		name string
		spec BGPPeerSpec
		want string
	}{
		{"global peer", BGPPeerSpec{PeerIP: "10.0.0.1", ASNumber: 64512}, ""},
		{"node and nodeSelector", BGPPeerSpec{Node: "a", NodeSelector: "all()", PeerIP: "10.0.0.1", ASNumber: 1},
			"spec.node: node and nodeSelector cannot both be set"},
		{"peerSelector with AS", BGPPeerSpec{PeerSelector: "all()", ASNumber: 1}, "spec.asNumber: must be empty when peerSelector is set"},
		{"local workloads need AS", BGPPeerSpec{LocalWorkloadSelector: "app == 'x'"}, "spec.asNumber: is required when localWorkloadSelector is set"},
		{"reachableBy of the other family", BGPPeerSpec{PeerIP: "[fd00::1]:179", ASNumber: 1, ReachableBy: "10.0.0.1"},
			"spec.reachableBy: 10.0.0.1 is IPv4 but peerIP [fd00::1]:179 is IPv6"},
		{"reachableBy with port", BGPPeerSpec{PeerIP: "10.0.0.2:179", ASNumber: 1, ReachableBy: "10.0.0.1"}, ""},
		{"both next-hop settings", BGPPeerSpec{PeerIP: "10.0.0.1", ASNumber: 1, KeepOriginalNextHop: true, NextHopMode: &self},
			"spec.keepOriginalNextHop: keepOriginalNextHop and nextHopMode cannot both be set"},
		{"bad filter name", BGPPeerSpec{PeerIP: "10.0.0.1", ASNumber: 1, Filters: []string{"Not_A_Name"}}, "spec.filters[0]:"},
		{"negative local AS count", BGPPeerSpec{PeerIP: "10.0.0.1", ASNumber: 1, NumAllowedLocalASNumbers: netPtr(int32(-1))},
			"spec.numAllowedLocalASNumbers: -1 is negative"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := &BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "peer"}, Spec: tc.spec}
			b.Default()
			err := b.Validate().Err()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}
