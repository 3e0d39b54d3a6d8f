package ipam

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func testPools() []Pool {
	manual := v3.AssignmentModeManual
	mk := func(name, cidr string, f func(*v3.IPPoolSpec)) v3.IPPool {
		p := v3.IPPool{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v3.IPPoolSpec{CIDR: cidr}}
		if f != nil {
			f(&p.Spec)
		}
		p.Default()
		return p
	}
	return ParsePools([]v3.IPPool{
		mk("default-v4", "10.0.0.0/16", nil),
		mk("default-v6", "fd00::/64", nil),
		mk("rack-a", "10.1.0.0/16", func(s *v3.IPPoolSpec) { s.NodeSelector = "rack == 'a'" }),
		mk("off", "10.2.0.0/16", func(s *v3.IPPoolSpec) { s.Disabled = true }),
		mk("lb", "10.3.0.0/16", func(s *v3.IPPoolSpec) { s.AllowedUses = []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseLoadBalancer} }),
		mk("manual", "10.4.0.0/16", func(s *v3.IPPoolSpec) { s.AssignmentMode = &manual }),
		mk("tunnel", "10.5.0.0/16", func(s *v3.IPPoolSpec) { s.AllowedUses = []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseTunnel} }),
		mk("ns-prod", "10.6.0.0/16", func(s *v3.IPPoolSpec) { s.NamespaceSelector = "env == 'prod'" }),
	})
}

func TestSelectPools(t *testing.T) {
	pools := testPools()
	for _, tc := range []struct {
		name    string
		req     PoolRequest
		want    []string
		wantErr error
	}{
		{name: "v4 default", req: PoolRequest{Version: 4}, want: []string{"default-v4", "ns-prod"}},
		{name: "v4 namespace labels known", req: PoolRequest{Version: 4, NamespaceLabels: map[string]string{"env": "dev"}}, want: []string{"default-v4"}},
		{name: "v4 prod namespace", req: PoolRequest{Version: 4, NamespaceLabels: map[string]string{"env": "prod"}}, want: []string{"default-v4", "ns-prod"}},
		{name: "v4 on rack a", req: PoolRequest{Version: 4, NodeLabels: map[string]string{"rack": "a"}, NamespaceLabels: map[string]string{}}, want: []string{"default-v4", "rack-a"}},
		{name: "v6", req: PoolRequest{Version: 6}, want: []string{"default-v6"}},
		{name: "tunnel use", req: PoolRequest{Version: 4, Use: v3.IPPoolAllowedUseTunnel, NamespaceLabels: map[string]string{}}, want: []string{"default-v4", "tunnel"}},
		{name: "load balancer", req: PoolRequest{Version: 4, Use: v3.IPPoolAllowedUseLoadBalancer}, want: []string{"lb"}},
		{name: "requested by name ignores node selector", req: PoolRequest{Version: 4, Requested: []string{"rack-a"}}, want: []string{"rack-a"}},
		{name: "requested by CIDR", req: PoolRequest{Version: 4, Requested: []string{"10.4.0.0/16", "default-v4"}}, want: []string{"manual", "default-v4"}},
		{name: "requested unknown", req: PoolRequest{Version: 4, Requested: []string{"nope"}}, wantErr: ErrUnknownPool},
		{name: "requested unknown CIDR", req: PoolRequest{Version: 4, Requested: []string{"10.9.0.0/16"}}, wantErr: ErrUnknownPool},
		{name: "requested disabled", req: PoolRequest{Version: 4, Requested: []string{"off"}}, wantErr: ErrPoolDisabled},
		{name: "requested wrong version", req: PoolRequest{Version: 6, Requested: []string{"default-v4"}}, wantErr: ErrInvalidArgs},
		{name: "none selects", req: PoolRequest{Version: 6, Use: v3.IPPoolAllowedUseLoadBalancer}, wantErr: ErrNoPool},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SelectPools(pools, tc.req)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("err = %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, p := range got {
				names = append(names, p.Name)
			}
			if diff := cmp.Diff(tc.want, names); diff != "" {
				t.Errorf("pools (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePodAnnotations(t *testing.T) {
	r, err := ParsePodAnnotations(map[string]string{
		AnnotationIPv4Pools: `["a","10.0.0.0/16"]`,
		AnnotationIPv6Pools: `["v6"]`,
		AnnotationIPAddrs:   `["10.0.0.7","fd00::7"]`,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IPv4Pools) != 2 || len(r.IPv6Pools) != 1 || len(r.IPAddrs) != 2 || r.IPAddrs[1] != addrs("fd00::7")[0] {
		t.Fatalf("%+v", r)
	}
	for _, bad := range []map[string]string{
		{AnnotationIPv4Pools: `a`},
		{AnnotationIPAddrs: `["10.0.0.300"]`},
	} {
		if _, err := ParsePodAnnotations(bad); !errors.Is(err, ErrInvalidArgs) {
			t.Errorf("%v: err = %v", bad, err)
		}
	}
}
