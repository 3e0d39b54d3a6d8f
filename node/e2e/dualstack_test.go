//go:build privileged && integration

package e2e

import (
	"context"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/internal/multinode"
)

// TestPrivilegedRegistersDualStack: an explicit IP without a prefix length
// is registered with its interface's (Calico's GetLocalCIDR), IP6=autodetect
// with IP6_AUTODETECTION_METHOD finds the IPv6 address, and with
// FELIX_IPV6SUPPORT=true the default IPv6 pool is created from
// CALICO_IPV6POOL_CIDR next to the IPv4 one.
func TestPrivilegedRegistersDualStack(t *testing.T) {
	c := multinode.New(t, multinode.Options{Nodes: 1, NoNodeResources: true, IPv6: true})
	n := c.Nodes[0]
	a := newAgent(t, c, n, "CALICO_NETWORKING_BACKEND=vxlan", "FELIX_IPV6SUPPORT=true",
		"IP="+n.Addr.Addr().String(), "IP6=autodetect", "IP6_AUTODETECTION_METHOD=cidr=fd00:30::/32",
		"CALICO_IPV4POOL_CIDR=10.83.0.0/16", "CALICO_IPV4POOL_VXLAN=Always", "CALICO_IPV6POOL_CIDR=fd00:83::/64", "CALICO_IPV6POOL_VXLAN=Always")
	a.readyFlags = []string{"-felix-ready"}
	a.start()
	a.waitReady(60 * time.Second)
	ctx := context.Background()
	r, err := c.Client.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: n.Name})
	if err != nil {
		t.Fatal(err)
	}
	if bgp := r.(*v3.Node).Spec.BGP; bgp == nil || bgp.IPv4Address != n.Addr.String() || bgp.IPv6Address != n.Addr6.String() {
		t.Errorf("Node's addresses %+v, want %s and %s", bgp, n.Addr, n.Addr6)
	}
	r, err = c.Client.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "default-ipv6-ippool"})
	if err != nil {
		t.Fatal(err)
	}
	if s := r.(*v3.IPPool).Spec; s.CIDR != "fd00:83::/64" || s.BlockSize != 122 || s.NATOutgoing || s.VXLANMode != v3.VXLANModeAlways {
		t.Errorf("default IPv6 pool %+v", s)
	}
}
