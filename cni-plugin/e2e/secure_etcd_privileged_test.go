//go:build privileged

package e2e

import (
	"net"
	"strings"
	"testing"
)

// TestPrivilegedSecuredEtcd: pods are wired, reach each other and are
// removed through libcni against an etcd that requires TLS client
// certificates (netconf etcd_ca_cert_file/etcd_cert_file/etcd_key_file,
// over etcd's TLS unix socket) and against one with authentication on
// (ETCD_USERNAME/ETCD_PASSWORD in the runtime's environment).
func TestPrivilegedSecuredEtcd(t *testing.T) {
	for _, security := range []string{"tls", "auth"} {
		t.Run(security, func(t *testing.T) {
			c := newCluster(t, clusterOpts{pools: []string{"10.245.0.0/16"}, etcdSecurity: security})
			a, b := c.newPod("sec-a"), c.newPod("sec-b")
			c.mustAdd(a)
			c.mustAdd(b)
			if !strings.HasPrefix(a.ip(false), "10.245.") {
				t.Fatalf("address %s", a.ip(false))
			}
			addr := serve(t, b.netns, net.JoinHostPort(b.ip(false), "8080"), "b")
			if got, err := dial(a.netns, addr); err != nil || got != "b" {
				t.Fatalf("pod -> pod: %q %v", got, err)
			}
			for _, p := range []*pod{a, b} {
				if err := c.del(p); err != nil {
					t.Fatalf("DEL %s: %v", p.rt.ContainerID, err)
				}
			}
			if left := c.leftovers(); len(left) > 0 {
				t.Fatalf("left behind: %v", left)
			}
		})
	}
}
