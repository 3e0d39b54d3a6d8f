//go:build privileged

package vmtest

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
)

var (
	ipipInputRule  = regexp.MustCompile(`-A cali-INPUT -p (4|ipencap) `)
	vxlanInputRule = regexp.MustCompile(`-A cali-INPUT -p udp .*4789`)
)

// encapState is what one node holds for the encapsulations: read in
// one exec each, compared as a whole.
type encapState struct {
	tunl0Addr, tunl0Up, vxlanDev bool
	routes                       []string
	ipipRule, vxlanRule          bool
	mtu                          string
}

func readEncap(t *testing.T, n *Node, pool netip.Prefix) encapState {
	t.Helper()
	var s encapState
	tun := n.MustExec("ip", "-4", "-o", "addr", "show", "dev", "tunl0")
	s.tunl0Addr = strings.Contains(tun, " inet ")
	s.tunl0Up = strings.Contains(n.MustExec("ip", "-o", "link", "show", "dev", "tunl0"), ",UP")
	_, err := n.Exec("ip", "link", "show", "dev", "vxlan.calico")
	s.vxlanDev = err == nil
	for _, r := range routesTo(t, n, pool) {
		if strings.Contains(r, " via ") {
			s.routes = append(s.routes, r)
		}
	}
	rules := n.MustExec("iptables-save", "-t", "filter")
	s.ipipRule, s.vxlanRule = ipipInputRule.MatchString(rules), vxlanInputRule.MatchString(rules)
	s.mtu = strings.TrimSpace(n.MustExec("cat", "/var/lib/calico/mtu"))
	return s
}

// wantIPIP: tunl0 addressed and up, no VXLAN device, every remote block
// via tunl0, the IPIP INPUT rule and not VXLAN's, MTU 1480.
func (s encapState) wantIPIP(peer netip.Addr) error {
	switch {
	case !s.tunl0Addr || !s.tunl0Up:
		return fmt.Errorf("tunl0 addressed %v, up %v", s.tunl0Addr, s.tunl0Up)
	case s.vxlanDev:
		return fmt.Errorf("vxlan.calico is still there")
	case !s.ipipRule || s.vxlanRule:
		return fmt.Errorf("cali-INPUT: IPIP rule %v, VXLAN rule %v", s.ipipRule, s.vxlanRule)
	case s.mtu != "1480":
		return fmt.Errorf("mtu file %s", s.mtu)
	}
	return onlyRoutes(s.routes, "via "+peer.String()+" dev tunl0")
}

// wantVXLAN: tunl0 without an address and down, vxlan.calico, every
// remote block via it, VXLAN's INPUT rule and not IPIP's, MTU 1450.
func (s encapState) wantVXLAN() error {
	switch {
	case s.tunl0Addr || s.tunl0Up:
		return fmt.Errorf("tunl0 addressed %v, up %v", s.tunl0Addr, s.tunl0Up)
	case !s.vxlanDev:
		return fmt.Errorf("no vxlan.calico")
	case s.ipipRule || !s.vxlanRule:
		return fmt.Errorf("cali-INPUT: IPIP rule %v, VXLAN rule %v", s.ipipRule, s.vxlanRule)
	case s.mtu != "1450":
		return fmt.Errorf("mtu file %s", s.mtu)
	}
	return onlyRoutes(s.routes, "dev vxlan.calico")
}

func onlyRoutes(routes []string, want string) error {
	if len(routes) == 0 {
		return fmt.Errorf("no route to the other node's blocks")
	}
	for _, r := range routes {
		if !strings.Contains(r, want) {
			return fmt.Errorf("route %q, want every remote block %s", r, want)
		}
	}
	return nil
}

// poolSwitch: the pool IPIP -> VXLAN -> IPIP; after each step every node
// holds exactly the new encapsulation's devices, routes, rules and MTU,
// the Node's tunnel addresses follow, and the pods still reach each other.
func poolSwitch(t *testing.T, c *Cluster, pool netip.Prefix, a, b *Pod) {
	t.Helper()
	steps := []struct {
		name        string
		ipip        v3.IPIPMode
		vxlan       v3.VXLANMode
		check       func(s encapState, peer netip.Addr) error
		ipipTunnel  bool
		vxlanTunnel bool
	}{
		{"VXLAN", v3.IPIPModeNever, v3.VXLANModeAlways, func(s encapState, _ netip.Addr) error { return s.wantVXLAN() }, false, true},
		{"IPIP again", v3.IPIPModeAlways, v3.VXLANModeNever, encapState.wantIPIP, true, false},
	}
	for _, st := range steps {
		start := time.Now()
		setPoolModes(t, c, "ipip", st.ipip, st.vxlan)
		for i, n := range c.Nodes {
			peer := c.Nodes[1-i].Addr.Addr()
			eventually(t, 2*time.Minute, st.name+" on "+n.Name, func() error {
				if err := st.check(readEncap(t, n, pool), peer); err != nil {
					return err
				}
				bgp := nodeResource(t, c, n.Name).Spec
				if got := bgp.BGP.IPv4IPIPTunnelAddr != ""; got != st.ipipTunnel {
					return fmt.Errorf("Node %s has an IPIP tunnel address: %v", n.Name, got)
				}
				if got := bgp.IPv4VXLANTunnelAddr != ""; got != st.vxlanTunnel {
					return fmt.Errorf("Node %s has a VXLAN tunnel address: %v", n.Name, got)
				}
				return nil
			})
		}
		eventually(t, time.Minute, st.name+": a -> b", func() error { _, err := a.Probe("tcp", b.IP, time.Second); return err })
		allProtocols(t, a, b)
		allProtocols(t, b, a)
		t.Logf("pool switched to %s: every node converged and traffic flows in %v", st.name, time.Since(start).Round(time.Millisecond))
	}
}
