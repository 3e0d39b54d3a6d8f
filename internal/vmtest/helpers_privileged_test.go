//go:build privileged

package vmtest

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func createPool(c *Cluster, name, cidr string, ipip v3.IPIPMode, vxlan v3.VXLANMode) {
	c.t.Helper()
	c.Create(&v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v3.IPPoolSpec{CIDR: cidr, IPIPMode: ipip, VXLANMode: vxlan, BlockSize: 26}})
}

func setPoolModes(t *testing.T, c *Cluster, name string, ipip v3.IPIPMode, vxlan v3.VXLANMode) {
	t.Helper()
	ctx := context.Background()
	r, err := c.Client.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	p := r.(*v3.IPPool)
	p.Spec.IPIPMode, p.Spec.VXLANMode = ipip, vxlan
	if _, err := c.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

func nodeResource(t *testing.T, c *Cluster, name string) *v3.Node {
	t.Helper()
	r, err := c.Client.Get(context.Background(), datastore.Key{Kind: v3.KindNode, Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return r.(*v3.Node)
}

// txPackets is a link's transmitted packet counter on the node.
func txPackets(t *testing.T, n *Node, dev string) uint64 {
	t.Helper()
	var links []struct {
		Stats64 struct {
			TX struct {
				Packets uint64 `json:"packets"`
			} `json:"tx"`
		} `json:"stats64"`
	}
	out := n.MustExec("ip", "-s", "-j", "link", "show", "dev", dev)
	if err := json.Unmarshal([]byte(out), &links); err != nil || len(links) != 1 {
		t.Fatalf("ip -s -j link show %s on %s: %v: %s", dev, n.Name, err, out)
	}
	return links[0].Stats64.TX.Packets
}

// eventually retries f every interval until it succeeds or d passes.
func eventually(t *testing.T, d time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, d, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// allProtocols checks TCP, UDP and ICMP from p to q: the servers answer
// with q's name.
func allProtocols(t *testing.T, p, q *Pod) {
	t.Helper()
	for _, proto := range []string{"tcp", "udp", "icmp"} {
		got, err := p.Probe(proto, q.IP, 3*time.Second)
		if err != nil {
			t.Errorf("%s %s(%s) -> %s(%s): %v", proto, p.Name, p.Node.Name, q.Name, q.Node.Name, err)
			continue
		}
		if proto != "icmp" && !strings.HasPrefix(got, q.Name) {
			t.Errorf("%s %s -> %s answered %q, want %s", proto, p.Name, q.Name, got, q.Name)
		}
	}
}

// routesTo returns the node's IPv4 routes whose destination is in pool.
func routesTo(t *testing.T, n *Node, pool netip.Prefix) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(n.MustExec("ip", "-4", "route", "show"), "\n") {
		f := strings.Fields(l)
		if len(f) == 0 {
			continue
		}
		dst, err := netip.ParsePrefix(f[0])
		if err != nil {
			if a, aerr := netip.ParseAddr(f[0]); aerr == nil {
				dst = netip.PrefixFrom(a, 32)
			} else {
				continue
			}
		}
		if pool.Overlaps(dst) {
			out = append(out, strings.TrimSpace(l))
		}
	}
	return out
}

// grepLines returns the lines of s containing sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
