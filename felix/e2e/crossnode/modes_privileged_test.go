//go:build privileged && integration

package crossnode

import (
	"context"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/felix/routes"
	"github.com/tabbynet/tabby/internal/multinode"
)

// TestPrivilegedCrossNodePolicy: a GlobalNetworkPolicy denying ingress
// from one remote pod's address applies to cross-node VXLAN traffic (the
// source address survives the encapsulation), while another remote pod
// still gets through.
func TestPrivilegedCrossNodePolicy(t *testing.T) {
	l := newLab(t, nil, multinode.PoolOptions{VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever})
	l.allPodToPod(t)
	l.Create(ct.GNP("deny-pod0", v3.DefaultTierName, ct.Ptr(1.0), "all()", ct.Ingress, []v3.Rule{
		{Action: v3.Deny, Source: v3.EntityRule{Nets: []string{l.pods[0].IP.String() + "/32"}}},
		{Action: v3.Allow},
	}, nil))
	eventually(t, "node0's pod denied into node1's pod", func() string {
		if why := l.podToPod(0, 1); why == "" {
			return "still allowed"
		}
		return ""
	})
	eventually(t, "node2's pod still allowed into node1's pod", func() string { return l.podToPod(2, 1) })
}

// TestPrivilegedCrossNodeModeSwitch: a pool switched VXLAN Always ->
// Never -> CrossSubnet -> Always converges on every node with nothing
// stale: at Never no vxlan.calico and no felix route is left (cross-node
// traffic is BGP's job and stops here, where no BGP runs), and traffic
// comes back with each encapsulating mode.
func TestPrivilegedCrossNodeModeSwitch(t *testing.T) {
	l := newLab(t, multinode.TwoSubnets, multinode.PoolOptions{VXLAN: v3.VXLANModeAlways, IPIP: v3.IPIPModeNever})
	l.allPodToPod(t)
	setMode := func(m v3.VXLANMode) {
		t.Helper()
		r, err := l.Client.Get(context.Background(), datastore.Key{Kind: v3.KindIPPool, Name: "pool"})
		if err != nil {
			t.Fatal(err)
		}
		r.(*v3.IPPool).Spec.VXLANMode = m
		if _, err := l.Client.Update(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	setMode(v3.VXLANModeNever)
	for _, n := range l.Nodes {
		eventually(t, n.Name+" clean at Never", func() string {
			if _, err := n.NL.LinkByName(routes.VXLANDevice); err == nil {
				return "vxlan.calico still there"
			}
			for _, p := range l.pods {
				if p.Node != n && hasLine(routeTable(t, n), blockOf(p.IP)) {
					return "route to " + blockOf(p.IP) + " still there:\n" + routeTable(t, n)
				}
			}
			return ""
		})
	}
	if why := l.podToPod(0, 2); why == "" {
		t.Error("cross-node traffic still flows with every mode Never and no BGP")
	}
	setMode(v3.VXLANModeCrossSubnet)
	l.allPodToPod(t)
	if r := routeTable(t, l.Nodes[0]); !strings.Contains(r, blockOf(l.pods[1].IP)+" via "+l.Nodes[1].Addr.Addr().String()+" dev eth0") ||
		!strings.Contains(r, blockOf(l.pods[2].IP)+" via") || !strings.Contains(r, "dev vxlan.calico") {
		t.Errorf("node0's routes at CrossSubnet:\n%s", r)
	}
	setMode(v3.VXLANModeAlways)
	eventually(t, "node0's same-subnet route back through vxlan.calico", func() string {
		r := routeTable(t, l.Nodes[0])
		for _, line := range strings.Split(r, "\n") {
			if strings.HasPrefix(line, blockOf(l.pods[1].IP)) && !strings.Contains(line, "vxlan.calico") {
				return line
			}
		}
		return ""
	})
	l.allPodToPod(t)
}
