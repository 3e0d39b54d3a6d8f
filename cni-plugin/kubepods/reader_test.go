package kubepods

import (
	"maps"
	"testing"
)

// TestIPAMAnnotations: the namespace's pool lists apply unless the pod
// sets its own, as in Calico's plugin; ipAddrs comes from the pod only.
func TestIPAMAnnotations(t *testing.T) {
	const v4, v6, addrs = "cni.projectcalico.org/ipv4pools", "cni.projectcalico.org/ipv6pools", "cni.projectcalico.org/ipAddrs"
	for _, tc := range []struct {
		name    string
		ns, pod map[string]string
		want    map[string]string
	}{
		{"namespace pools", map[string]string{v4: `["a"]`, v6: `["b"]`}, nil, map[string]string{v4: `["a"]`, v6: `["b"]`}},
		{"the pod's pools win", map[string]string{v4: `["a"]`, v6: `["b"]`}, map[string]string{v4: `["p"]`}, map[string]string{v4: `["p"]`, v6: `["b"]`}},
		{"an empty pod value does not", map[string]string{v4: `["a"]`}, map[string]string{v4: ""}, map[string]string{v4: `["a"]`}},
		{"ipAddrs from the pod only", map[string]string{addrs: `["10.0.0.1"]`}, map[string]string{addrs: `["10.0.0.2"]`}, map[string]string{addrs: `["10.0.0.2"]`}},
		{"nothing", nil, nil, map[string]string{}},
	} {
		if got := ipamAnnotations(tc.ns, tc.pod); !maps.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}
