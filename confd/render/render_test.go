package render

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func node(name, v4 string) v3.Node {
	return v3.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.NodeSpec{BGP: &v3.NodeBGPSpec{IPv4Address: v4}}}
}

func TestRenderErrors(t *testing.T) {
	base := func() Input {
		return Input{NodeName: "node1", Nodes: []v3.Node{node("node1", "10.0.0.1/24"), node("node2", "10.0.0.2/24")}}
	}
	peer := func(spec v3.BGPPeerSpec) v3.BGPPeer {
		return v3.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: spec}
	}
	for _, tc := range []struct {
		name string
		mod  func(*Input)
		want string
	}{
		{"unknown node", func(in *Input) { in.NodeName = "nope" }, "local node not found"},
		{"invalid peer IP", func(in *Input) {
			in.Peers = []v3.BGPPeer{peer(v3.BGPPeerSpec{PeerIP: "10.0.0.300", ASNumber: 65000})}
		}, `BGPPeer "bad" is invalid: spec.peerIP`},
		{"missing AS", func(in *Input) {
			in.Peers = []v3.BGPPeer{peer(v3.BGPPeerSpec{PeerIP: "10.0.0.254"})}
		}, `BGPPeer "bad" is invalid: spec.asNumber is required`},
		{"missing secret", func(in *Input) {
			in.Peers = []v3.BGPPeer{peer(v3.BGPPeerSpec{PeerIP: "10.0.0.254", ASNumber: 65000,
				Password: &v3.BGPPassword{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})}
		}, "secret s key k is not available"},
		{"password BIRD cannot quote", func(in *Input) {
			in.Secrets = map[SecretRef]string{{Name: "s", Key: "k"}: `a"b`}
			in.Peers = []v3.BGPPeer{peer(v3.BGPPeerSpec{PeerIP: "10.0.0.254", ASNumber: 65000,
				Password: &v3.BGPPassword{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})}
		}, "quote"},
		{"password with a tab", func(in *Input) {
			in.Secrets = map[SecretRef]string{{Name: "s", Key: "k"}: "a\tb"}
			in.Peers = []v3.BGPPeer{peer(v3.BGPPeerSpec{PeerIP: "10.0.0.254", ASNumber: 65000,
				Password: &v3.BGPPassword{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "k"}}})}
		}, "control character"},
		{"bad router ID", func(in *Input) { in.RouterID = "fd00::1" }, "router ID"},
		{"bad community", func(in *Input) {
			in.BGPConfigurations = []v3.BGPConfiguration{{ObjectMeta: metav1.ObjectMeta{Name: "default"},
				Spec: v3.BGPConfigurationSpec{PrefixAdvertisements: []v3.PrefixAdvertisement{{CIDR: "10.0.0.0/8", Communities: []string{"nope"}}}}}}
		}, `"nope" is not a community`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := base()
			tc.mod(&in)
			_, err := Render(in)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Render error = %v, want one containing %q", err, tc.want)
			}
			if tc.name == "unknown node" && !errors.Is(err, ErrNoNode) {
				t.Errorf("want ErrNoNode, got %v", err)
			}
		})
	}
}

func TestHashRouterIDMatchesCalico(t *testing.T) {
	// Calico's hashToIPv4 maps the first octet out of 224-255 by subtracting 32.
	for _, name := range []string{"node1", "worker-17", "a"} {
		id := hashToIPv4(name)
		var a, b, c, d int
		if n, _ := fmtSscan(id, &a, &b, &c, &d); n != 4 || a > 223 {
			t.Errorf("hashToIPv4(%q) = %q, want a unicast IPv4", name, id)
		}
	}
}

func TestPerNodeASOverridesDefault(t *testing.T) {
	as := numorstring.ASNumber(65001)
	in := Input{NodeName: "node1", Nodes: []v3.Node{node("node1", "10.0.0.1/24"), node("node2", "10.0.0.2/24")}}
	in.Nodes[0].Spec.BGP.ASNumber = &as
	out, err := Render(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local 10.0.0.1 as 65001;", "neighbor 10.0.0.2 as 64512;", "export filter tabby_out_ebgp4;"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
}

func fmtSscan(s string, v ...*int) (int, error) {
	return fmt.Sscanf(s, "%d.%d.%d.%d", v[0], v[1], v[2], v[3])
}
