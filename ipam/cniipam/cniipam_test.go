package cniipam

import (
	"context"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/ipamtest"
)

func setup(t *testing.T, rs ...v3.Resource) (*ipamtest.Store, *Plugin) {
	t.Helper()
	s := ipamtest.NewStore()
	for _, r := range rs {
		if _, err := s.Create(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	return s, &Plugin{Alloc: ipam.New(s, ipam.Config{})}
}

func pool(name, cidr string) *v3.IPPool {
	return &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.IPPoolSpec{CIDR: cidr}}
}

func req(cid string) Request {
	return Request{Network: "k8s-pod-network", ContainerID: cid, Node: "n1", Namespace: "default", Pod: "pod-" + cid}
}

func code(err error) uint {
	var e *types.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return 0
}

func TestAddDelCheck(t *testing.T) {
	_, p := setup(t, pool("v4", "10.0.0.0/24"), pool("v6", "fd00::/120"))
	ctx := context.Background()
	r := req("c1")
	yes := "true"
	r.Conf.AssignIPv6 = &yes
	res, err := p.Add(ctx, r)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.IPs) != 2 || res.IPs[0].Address.String() != "10.0.0.0/32" && !netip.MustParsePrefix("10.0.0.0/24").Contains(netip.MustParseAddr(res.IPs[0].Address.IP.String())) {
		t.Fatalf("ips %v", res.IPs)
	}
	if ones, bits := res.IPs[1].Address.Mask.Size(); ones != 128 || bits != 128 || len(res.Routes) != 2 {
		t.Fatalf("v6 %v routes %v", res.IPs[1], res.Routes)
	}
	again, err := p.Add(ctx, r)
	if err != nil || again.IPs[0].Address.String() != res.IPs[0].Address.String() {
		t.Fatalf("repeated ADD: %v %v", again, err)
	}
	if err := p.Check(ctx, r, res); err != nil {
		t.Fatal(err)
	}
	if err := p.Del(ctx, r); err != nil {
		t.Fatal(err)
	}
	if err := p.Del(ctx, r); err != nil {
		t.Fatalf("second DEL: %v", err)
	}
	if err := p.Check(ctx, r, res); err == nil {
		t.Fatal("CHECK passed after DEL")
	}
}

func TestAnnotations(t *testing.T) {
	_, p := setup(t, pool("a", "10.1.0.0/24"), pool("b", "10.2.0.0/24"))
	ctx := context.Background()
	r := req("c1")
	r.Annotations = map[string]string{ipam.AnnotationIPv4Pools: `["b"]`}
	res, err := p.Add(ctx, r)
	if err != nil || res.IPs[0].Address.IP.To4()[1] != 2 {
		t.Fatalf("%v %v", res, err)
	}
	r = req("c2")
	r.Annotations = map[string]string{ipam.AnnotationIPAddrs: `["10.1.0.9"]`}
	res, err = p.Add(ctx, r)
	if err != nil || res.IPs[0].Address.String() != "10.1.0.9/32" {
		t.Fatalf("%v %v", res, err)
	}
	for _, tc := range []struct {
		ann  map[string]string
		code uint
	}{
		{map[string]string{ipam.AnnotationIPv4Pools: `["nope"]`}, ErrCodeBadPool},
		{map[string]string{ipam.AnnotationIPAddrs: `["10.1.0.9"]`}, ErrCodeBadAddress},
		{map[string]string{ipam.AnnotationIPAddrs: `["192.168.0.1"]`}, ErrCodeBadAddress},
		{map[string]string{ipam.AnnotationIPAddrs: `not json`}, types.ErrInvalidNetworkConfig},
	} {
		r := req("bad")
		r.Annotations = tc.ann
		if _, err := p.Add(ctx, r); code(err) != tc.code {
			t.Errorf("%v: err %v, want code %d", tc.ann, err, tc.code)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	tiny := pool("tiny", "10.0.0.0/32")
	tiny.Spec.BlockSize = 32
	s, p := setup(t, tiny)
	ctx := context.Background()
	if _, err := p.Add(ctx, req("c1")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Add(ctx, req("c2")); code(err) != ErrCodePoolExhausted {
		t.Fatalf("exhausted: %v", err)
	}
	s.Fail = func(string, datastore.Key) error { return &datastore.UnavailableError{Err: errors.New("down")} }
	if _, err := p.Add(ctx, req("c3")); code(err) != types.ErrTryAgainLater {
		t.Fatalf("down: %v", err)
	}
	if err := p.Del(ctx, req("c1")); code(err) != types.ErrTryAgainLater {
		t.Fatalf("DEL while down: %v", err)
	}
	if err := p.Status(ctx); code(err) != types.ErrPluginNotAvailable {
		t.Fatalf("STATUS while down: %v", err)
	}
	s.Fail = nil
	if err := p.Status(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseConf([]byte(`{"ipam":{"type":"calico-ipam","assign_ipv4":"yes"}}`)); code(err) != types.ErrInvalidNetworkConfig {
		t.Fatalf("bad conf: %v", err)
	}
}

func TestGC(t *testing.T) {
	_, p := setup(t, pool("p", "10.0.0.0/24"))
	ctx := context.Background()
	for _, c := range []string{"keep", "gone1", "gone2"} {
		if _, err := p.Add(ctx, req(c)); err != nil {
			t.Fatal(err)
		}
	}
	other := req("othernode")
	other.Node = "n2"
	p.Add(ctx, other)
	released, err := p.GC(ctx, "k8s-pod-network", "n1", []types.GCAttachment{{ContainerID: "keep", IfName: "eth0"}})
	if err != nil || len(released) != 2 {
		t.Fatalf("released %v, %v", released, err)
	}
	for _, c := range []Request{req("keep"), other} {
		if err := p.Check(ctx, c, nil); err != nil {
			t.Errorf("%s lost its address: %v", c.ContainerID, err)
		}
	}
}

func TestHostLockSerialises(t *testing.T) {
	path := t.TempDir() + "/ipam.lock"
	ctx := context.Background()
	unlock := hostLock(ctx, path)
	got := make(chan struct{})
	go func() {
		defer hostLock(ctx, path)()
		close(got)
	}()
	select {
	case <-got:
		t.Fatal("second holder got the lock while the first held it")
	case <-time.After(50 * time.Millisecond):
	}
	unlock()
	select {
	case <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("lock never handed over")
	}
}

// TestHandleIDPerInterface: eth0 keeps Calico's handle, any other
// interface of the container has its own.
func TestHandleIDPerInterface(t *testing.T) {
	for _, tc := range []struct{ ifName, want string }{
		{"eth0", "k8s-pod-network.abc"},
		{"", "k8s-pod-network.abc"},
		{"net1", "k8s-pod-network.abc.net1"},
	} {
		if got := HandleID("k8s-pod-network", "abc", tc.ifName); got != tc.want {
			t.Errorf("%q: %s, want %s", tc.ifName, got, tc.want)
		}
	}
}
