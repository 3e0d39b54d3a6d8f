package agent

import "testing"

// TestTunnelOptions: host encryption from calico-node's environment, as
// felix parses booleans.
func TestTunnelOptions(t *testing.T) {
	for v, want := range map[string]bool{"": false, "true": true, "True": true, "false": false, "bogus": false} {
		got := tunnelOptions(func(k string) string {
			if k == "FELIX_WIREGUARDHOSTENCRYPTIONENABLED" {
				return v
			}
			return ""
		}).WireguardHostEncryption
		if got != want {
			t.Errorf("FELIX_WIREGUARDHOSTENCRYPTIONENABLED=%q: %v, want %v", v, got, want)
		}
	}
}
