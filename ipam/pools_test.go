package ipam

import (
	"errors"
	"strings"
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
		// A pool with a namespaceSelector may not allow Tunnel (validation).
		mk("ns-prod", "10.6.0.0/16", func(s *v3.IPPoolSpec) {
			s.NamespaceSelector = "env == 'prod'"
			s.AllowedUses = []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseWorkload}
		}),
		mk("not-restricted", "10.7.0.0/16", func(s *v3.IPPoolSpec) {
			s.NamespaceSelector = "!has(restricted)"
			s.AllowedUses = []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseWorkload}
		}),
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
		// As Calico: no namespace known is matched as no labels.
		{name: "v4 no namespace", req: PoolRequest{Version: 4}, want: []string{"default-v4", "not-restricted"}},
		{name: "v4 labels exclude a negative selector", req: PoolRequest{Version: 4, NamespaceLabels: map[string]string{"restricted": "1"}}, want: []string{"default-v4"}},
		{name: "v4 namespace labels known", req: PoolRequest{Version: 4, NamespaceLabels: map[string]string{"env": "dev"}}, want: []string{"default-v4", "not-restricted"}},
		{name: "v4 prod namespace", req: PoolRequest{Version: 4, NamespaceLabels: map[string]string{"env": "prod"}}, want: []string{"default-v4", "not-restricted", "ns-prod"}},
		{name: "v4 on rack a", req: PoolRequest{Version: 4, NodeLabels: map[string]string{"rack": "a"}, NamespaceLabels: map[string]string{}}, want: []string{"default-v4", "not-restricted", "rack-a"}},
		{name: "v6", req: PoolRequest{Version: 6}, want: []string{"default-v6"}},
		{name: "tunnel use", req: PoolRequest{Version: 4, Use: v3.IPPoolAllowedUseTunnel, NamespaceLabels: map[string]string{"restricted": ""}}, want: []string{"default-v4", "tunnel"}},
		{name: "requested ignores namespace selector", req: PoolRequest{Version: 4, Requested: []string{"ns-prod"}, NamespaceLabels: map[string]string{"env": "dev"}}, want: []string{"ns-prod"}},
		{name: "requested ignores assignment mode and both selectors", req: PoolRequest{Version: 4, Requested: []string{"manual", "rack-a", "ns-prod"}}, want: []string{"manual", "rack-a", "ns-prod"}},
		{name: "requested disallowed use", req: PoolRequest{Version: 4, Requested: []string{"lb"}}, wantErr: ErrInvalidArgs},
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

// TestSelectPoolsNoPoolSaysWhy: when automatic selection leaves nothing,
// the error names every pool of the version and why it was passed over,
// never falling back to a pool the selectors exclude.
func TestSelectPoolsNoPoolSaysWhy(t *testing.T) {
	manual := v3.AssignmentModeManual
	pools := ParsePools([]v3.IPPool{
		{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: v3.IPPoolSpec{CIDR: "10.0.0.0/16", NamespaceSelector: "ns != 'w'"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pool-w"}, Spec: v3.IPPoolSpec{CIDR: "10.1.0.0/16", NamespaceSelector: "ns == 'w'", Disabled: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "rack"}, Spec: v3.IPPoolSpec{CIDR: "10.2.0.0/16", NodeSelector: "rack == 'a'"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "by-hand"}, Spec: v3.IPPoolSpec{CIDR: "10.3.0.0/16", AssignmentMode: &manual}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lb"}, Spec: v3.IPPoolSpec{CIDR: "10.4.0.0/16", AllowedUses: []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseLoadBalancer}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "v6"}, Spec: v3.IPPoolSpec{CIDR: "fd00::/64"}},
	})
	_, err := SelectPools(pools, PoolRequest{Version: 4, Namespace: "w", NamespaceLabels: map[string]string{"ns": "w"}})
	if !errors.Is(err, ErrNoPool) {
		t.Fatalf("err = %v, want ErrNoPool", err)
	}
	for _, want := range []string{
		`no configured Calico pools for this node and namespace "w"`,
		`default (10.0.0.0/16) has namespaceSelector "ns != 'w'", which does not select namespace "w"`,
		`pool-w (10.1.0.0/16) is disabled`,
		`rack (10.2.0.0/16) has nodeSelector "rack == 'a'", which does not select the node`,
		`by-hand (10.3.0.0/16) has assignmentMode Manual`,
		`lb (10.4.0.0/16) does not allow use Workload`,
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "fd00::") {
		t.Errorf("error %q names a pool of the other version", err)
	}
	// The namespace of a pod whose labels cannot be read (etcd without
	// Kubernetes) is matched as having none, and the error says so.
	onlyW := ParsePools([]v3.IPPool{{ObjectMeta: metav1.ObjectMeta{Name: "w"}, Spec: v3.IPPoolSpec{CIDR: "10.1.0.0/16", NamespaceSelector: "ns == 'w'"}}})
	_, err = SelectPools(onlyW, PoolRequest{Version: 4, Namespace: "w"})
	if !errors.Is(err, ErrNoPool) || !strings.Contains(err.Error(), "labels are unknown") {
		t.Errorf("unknown namespace labels: err = %v", err)
	}
	if _, err := SelectPools(pools, PoolRequest{Version: 6, Use: v3.IPPoolAllowedUseTunnel, NamespaceLabels: map[string]string{}}); err != nil {
		t.Errorf("v6 tunnel: %v", err)
	}
	_, err = SelectPools(nil, PoolRequest{Version: 4})
	if !errors.Is(err, ErrNoPool) || !strings.Contains(err.Error(), "there is no IPv4 pool") {
		t.Errorf("no pools: err = %v", err)
	}
}
