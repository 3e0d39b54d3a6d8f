package multinode

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// Addressing of the lab. Subnet s (0 or 1) is 172.30.<s+1>.0/24 with the
// router at .1 and node i at .<10+i>; the external namespace is
// 198.51.100.2 behind the router's 198.51.100.1.
// With IPv6, subnet s is also fd00:30:<s+1>::/64 (router ::1, node i
// ::<10+i>) and the external namespace fd00:51::2 behind fd00:51::1.
var (
	ExternalIP   = netip.MustParseAddr("198.51.100.2")
	ExternalIPv6 = netip.MustParseAddr("fd00:51::2")
	routerExt    = netip.MustParsePrefix("198.51.100.1/24")
	routerExt6   = netip.MustParsePrefix("fd00:51::1/64")
)

func subnetRouter6(s int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("fd00:30:%d::1/64", s+1))
}

func nodeAddr6(s, i int) netip.Prefix {
	return netip.MustParsePrefix(fmt.Sprintf("fd00:30:%d::%d/64", s+1, 10+i))
}

func subnetRouter(s int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 30, byte(s + 1), 1}), 24)
}

func nodeAddr(s, i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 30, byte(s + 1), byte(10 + i)}), 24)
}

// Options shape a Cluster.
type Options struct {
	// Nodes is the number of nodes [default 3].
	Nodes int
	// SubnetOf gives node i's underlay subnet, 0 or 1 [default: all in 0].
	// Nodes in different subnets reach each other through the router.
	SubnetOf func(i int) int
	// NoNodeResources leaves the Node resources to the test (e.g. to
	// register them through node/registration). By default each node's
	// Node is created with its BGP IPv4 address.
	NoNodeResources bool
	// PolicySetupTimeoutSeconds sets the CNI's policy_setup_timeout_seconds
	// (ADD waits for felix's endpoint status file) [default 0: no wait].
	PolicySetupTimeoutSeconds int
	// IPv6 adds IPv6 to the underlay, the nodes (and their Node
	// resources), felix and the pods (the CNI assigns IPv6 too).
	IPv6 bool
	// Bare leaves the datastore empty: no ClusterInformation, tiers or
	// namespace profile (for tests of what initialises it). Implies
	// NoNodeResources.
	Bare bool
}

// TwoSubnets puts node 0 and 1 in subnet 0 and the others in subnet 1:
// the CrossSubnet shape (internal/vmtest's too).
func TwoSubnets(i int) int {
	if i < 2 {
		return 0
	}
	return 1
}

// Cluster is the lab: underlay, external namespace, nodes and a datastore.
type Cluster struct {
	t        testing.TB
	Prefix   string
	Underlay *Namespace
	External *Namespace
	Nodes    []*Node
	Etcd     *testservers.Etcd
	Client   datastore.Client
	ipv6     bool
	opts     Options
}

// Node is one node namespace: eth0 on the underlay, its Node resource
// name, and the pods wired on it.
type Node struct {
	c    *Cluster
	Name string // the Node resource's name
	*Namespace
	Subnet int
	// Addr is eth0's address with its prefix length; Addr6 the IPv6 one
	// (with Options.IPv6).
	Addr, Addr6 netip.Prefix
	cni         *nodeCNI
	// StatusPrefix is felix's EndpointStatusPathPrefix on this node (the
	// CNI's endpoint_status_dir is <StatusPrefix>/endpoint-status).
	StatusPrefix string
}

// New builds a cluster and removes all of it when the test ends.
func New(t testing.TB, o Options) *Cluster {
	t.Helper()
	netnstest.RequireRoot(t)
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.SubnetOf == nil {
		o.SubnetOf = func(int) int { return 0 }
	}
	c := &Cluster{t: t, Prefix: newPrefix(), ipv6: o.IPv6, opts: o}
	t.Logf("multinode cluster %s: %d nodes", c.Prefix, o.Nodes)
	c.Underlay = newNamespace(t, c.Prefix+"-underlay")
	c.External = newNamespace(t, c.Prefix+"-external")
	if err := c.Underlay.Sysctl("net.ipv4.ip_forward", "1"); err != nil {
		t.Fatal(err)
	}
	used := map[int]bool{}
	for i := 0; i < o.Nodes; i++ {
		used[o.SubnetOf(i)] = true
	}
	for s := range used {
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: fmt.Sprintf("br%d", s)}}
		if err := c.Underlay.NL.LinkAdd(br); err != nil {
			t.Fatalf("bridge in underlay: %v", err)
		}
		c.must(addrUp(c.Underlay.NL, br.Name, subnetRouter(s)))
		if o.IPv6 {
			c.must(addrUp(c.Underlay.NL, br.Name, subnetRouter6(s)))
		}
	}
	c.must(c.link(c.Underlay, "ext", c.External, "eth0"))
	c.must(addrUp(c.Underlay.NL, "ext", routerExt))
	c.must(addrUp(c.External.NL, "eth0", netip.PrefixFrom(ExternalIP, 24)))
	c.must(defaultRoute(c.External.NL, routerExt.Addr()))
	if o.IPv6 {
		c.must(c.Underlay.Sysctl("net.ipv6.conf.all.forwarding", "1"))
		c.must(addrUp(c.Underlay.NL, "ext", routerExt6))
		c.must(addrUp(c.External.NL, "eth0", netip.PrefixFrom(ExternalIPv6, 64)))
		c.must(defaultRoute(c.External.NL, routerExt6.Addr()))
	}

	// The plugins (exec'd by libcni with this process's environment) keep
	// their IPAM block hints in the test's folder.
	t.Setenv("TABBY_CNI_HINT_DIR", t.TempDir())
	if o.Bare {
		o.NoNodeResources = true
		c.Etcd, c.Client = StartEtcd(t, "", "")
	} else {
		c.Etcd, c.Client = StartEtcd(t, "multinode", "multinode,etcd")
	}

	for i := 0; i < o.Nodes; i++ {
		s := o.SubnetOf(i)
		n := &Node{c: c, Name: fmt.Sprintf("node%d", i), Subnet: s, Addr: nodeAddr(s, i), StatusPrefix: t.TempDir()}
		n.Namespace = newNamespace(t, c.Prefix+"-"+n.Name)
		port := fmt.Sprintf("n%d", i)
		c.must(c.link(c.Underlay, port, n.Namespace, "eth0"))
		br, err := c.Underlay.NL.LinkByName(fmt.Sprintf("br%d", s))
		c.must(err)
		pl, err := c.Underlay.NL.LinkByName(port)
		c.must(err)
		c.must(c.Underlay.NL.LinkSetMaster(pl, br))
		c.must(c.Underlay.NL.LinkSetUp(pl))
		c.must(addrUp(n.NL, "eth0", n.Addr))
		c.must(defaultRoute(n.NL, subnetRouter(s).Addr()))
		// ip_forward stays off: felix (the route manager) turns it on.
		bgp := &v3.NodeBGPSpec{IPv4Address: n.Addr.String()}
		if o.IPv6 {
			n.Addr6 = nodeAddr6(s, i)
			c.must(addrUp(n.NL, "eth0", n.Addr6))
			c.must(defaultRoute(n.NL, subnetRouter6(s).Addr()))
			bgp.IPv6Address = n.Addr6.String()
		}
		if !o.NoNodeResources {
			c.Create(&v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode}, ObjectMeta: metav1.ObjectMeta{Name: n.Name},
				Spec: v3.NodeSpec{BGP: bgp}})
		}
		c.Nodes = append(c.Nodes, n)
	}
	return c
}

func (c *Cluster) must(err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
}

// Create writes r to the datastore or fails the test.
func (c *Cluster) Create(r v3.Resource) v3.Resource {
	c.t.Helper()
	return Create(c.t, c.Client, r)
}

// Create writes r to client or fails the test.
func Create(t testing.TB, client datastore.Client, r v3.Resource) v3.Resource {
	t.Helper()
	out, err := client.Create(context.Background(), r)
	if err != nil {
		t.Fatalf("creating %s %s: %v", r.GetObjectKind().GroupVersionKind().Kind, r.GetName(), err)
	}
	return out
}

// StartEtcd starts a test etcd and a datastore client on it, both
// stopped when the test ends. With a calicoVersion it initialises the
// datastore as calico-node would (ClusterInformation, tiers, default
// configurations) and adds the namespace profile kube-controllers
// would provide (kns.default: allow unless a policy says otherwise);
// with "" it leaves the datastore empty.
func StartEtcd(t testing.TB, calicoVersion, clusterType string) (*testservers.Etcd, datastore.Client) {
	t.Helper()
	e := testservers.StartEtcd(t)
	client, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.Close() })
	if calicoVersion == "" {
		return e, client
	}
	if err := datastore.EnsureInitialized(context.Background(), client, calicoVersion, clusterType); err != nil {
		t.Fatal(err)
	}
	Create(t, client, &v3.Profile{TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile}, ObjectMeta: metav1.ObjectMeta{Name: "kns.default"},
		Spec: v3.ProfileSpec{Ingress: []v3.Rule{{Action: v3.Allow}}, Egress: []v3.Rule{{Action: v3.Allow}}}})
	return e, client
}

// PoolOptions are the encapsulation and NAT settings of a pool.
type PoolOptions struct {
	IPIP        v3.IPIPMode
	VXLAN       v3.VXLANMode
	NATOutgoing bool
	BlockSize   int
}

// CreatePool creates an IPPool (IPv4 or IPv6 by its CIDR).
func (c *Cluster) CreatePool(name, cidr string, o PoolOptions) *v3.IPPool {
	c.t.Helper()
	p := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v3.IPPoolSpec{CIDR: cidr, IPIPMode: o.IPIP, VXLANMode: o.VXLAN, NATOutgoing: o.NATOutgoing, BlockSize: o.BlockSize}}
	return c.Create(p).(*v3.IPPool)
}

// link creates a veth pair from a's namespace, a's end named an and b's
// end bn, both up.
func (c *Cluster) link(a *Namespace, an string, b *Namespace, bn string) error {
	v := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: an}, PeerName: bn, PeerNamespace: netlink.NsFd(int(b.Fd()))}
	if err := a.NL.LinkAdd(v); err != nil {
		return fmt.Errorf("veth %s/%s - %s/%s: %w", a.Name, an, b.Name, bn, err)
	}
	for _, e := range []struct {
		h    *netlink.Handle
		name string
	}{{a.NL, an}, {b.NL, bn}} {
		l, err := e.h.LinkByName(e.name)
		if err != nil {
			return err
		}
		if err := e.h.LinkSetUp(l); err != nil {
			return err
		}
	}
	return nil
}

func addrUp(h *netlink.Handle, link string, p netip.Prefix) error {
	l, err := h.LinkByName(link)
	if err != nil {
		return fmt.Errorf("finding %s: %w", link, err)
	}
	a, err := netlink.ParseAddr(p.String())
	if err != nil {
		return err
	}
	if p.Addr().Is6() {
		a.Flags = unix.IFA_F_NODAD // usable at once
	}
	if err := h.AddrAdd(l, a); err != nil {
		return fmt.Errorf("adding %s to %s: %w", p, link, err)
	}
	return h.LinkSetUp(l)
}

func defaultRoute(h *netlink.Handle, gw netip.Addr) error {
	if err := h.RouteAdd(&netlink.Route{Gw: gw.AsSlice()}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}
