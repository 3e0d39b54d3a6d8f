//go:build privileged

package e2e

import (
	"net"
	"os/exec"
	"strings"
	"testing"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedPortmapChain: calico first in a conflist followed by
// containernetworking's portmap; the prevResult passes through and a host
// port reaches the pod.
func TestPrivilegedPortmapChain(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.250.0.0/16"}, portmap: true})
	p := c.newPod("web")
	p.rt.CapabilityArgs = map[string]any{"portMappings": []map[string]any{
		{"hostPort": 8080, "containerPort": 80, "protocol": "tcp"},
	}}
	c.mustAdd(p)
	serve(t, p.netns, net.JoinHostPort(p.ip(false), "80"), "web")
	if got, err := dial(c.node, netnstest.NodeIPv4+":8080"); err != nil || got != "web" {
		var rules []byte
		c.inNode(func() error { rules, _ = exec.Command("iptables-save", "-t", "nat").CombinedOutput(); return nil })
		t.Fatalf("node:8080 -> pod:80 through portmap: %q %v\n%s", got, err, rules)
	}
	if err := c.check(p); err != nil {
		t.Fatalf("CHECK through the chain: %v", err)
	}
	if err := c.del(p); err != nil {
		t.Fatal(err)
	}
	var rules []byte
	c.inNode(func() error { rules, _ = exec.Command("iptables-save", "-t", "nat").CombinedOutput(); return nil })
	if strings.Contains(string(rules), "dport 8080") {
		t.Errorf("portmap rules left after DEL:\n%s", rules)
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left behind: %v", left)
	}
}
