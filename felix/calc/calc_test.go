package calc_test

import (
	"flag"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("reading golden file (run with -update to create): %v", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("%s mismatch (-want +got), rerun with -update if intended:\n%s", name, diff)
	}
}

func TestScenarioGolden(t *testing.T) {
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	golden(t, "scenario.golden", res.String())
}

func TestOrderIndependence(t *testing.T) {
	objs := ct.Scenario()
	want := calc.Compute(ct.Input(ct.Node, objs))
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		shuffled := slices.Clone(objs)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		got := calc.Compute(ct.Input(ct.Node, shuffled))
		if diff := cmp.Diff(want, got, cmpopts.EquateComparable(netip.Prefix{})); diff != "" {
			t.Fatalf("shuffle %d: result differs (-first +shuffled):\n%s", i, diff)
		}
	}
}

func TestComputeDoesNotModifyInput(t *testing.T) {
	objs := ct.Scenario()
	in := ct.Input(ct.Node, objs)
	before := ct.Input(ct.Node, ct.Scenario())
	calc.Compute(in)
	if diff := cmp.Diff(before, in); diff != "" {
		t.Fatalf("input modified:\n%s", diff)
	}
}

func endpoint(t *testing.T, res *calc.Result, key string) calc.Endpoint {
	t.Helper()
	for _, ep := range res.Endpoints {
		if ep.Key == key {
			return ep
		}
	}
	t.Fatalf("no local endpoint %q in %v", key, res.Endpoints)
	return calc.Endpoint{}
}

func TestSemantics(t *testing.T) {
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	web := endpoint(t, res, "prod/node1-k8s-web-eth0")
	db := endpoint(t, res, "prod/node1-k8s-db-eth0")
	client := endpoint(t, res, "dev/node1-k8s-client-eth0")

	tierNames := func(tps []calc.TierPolicies) (out []string) {
		for _, tp := range tps {
			for _, p := range tp.Policies {
				out = append(out, p.String())
			}
		}
		return out
	}
	findSet := func(members ...string) string {
		for id, s := range res.IPSets {
			if slices.Equal(s.Members.Slice(), members) {
				return id
			}
		}
		return ""
	}

	tests := []struct {
		name string
		got  any
		want any
	}{
		{"web ingress: tier order then policy order", tierNames(web.Ingress), []string{
			"security/security.deny-blocked", "security/security.pass-prod",
			"default/prod/web-from-dev", "default/prod/web-from-partners"}},
		{"db ingress: nil policy order after ordered; platform tier between", tierNames(db.Ingress), []string{
			"security/security.deny-blocked", "security/security.pass-prod",
			"platform/platform.log-icmp", "default/prod/db-from-sa"}},
		{"platform tier default action Pass", db.Ingress[1].DefaultAction, v3.Pass},
		{"web has no egress policy: profiles decide", len(web.Egress), 0},
		{"client egress from the namespace-wide policy", tierNames(client.Egress), []string{"default/dev/client-egress"}},
		{"client ingress only the global deny (not prod's pass)", tierNames(client.Ingress), []string{"security/security.deny-blocked"}},
		{"remote-only policy not active", res.Policies[calc.PolicyID{Tier: "default", Namespace: "prod", Name: "remote-only"}] == nil, true},
		{"profiles kept", web.Profiles, []string{"kns.prod"}},
		{"named port set: web endpoints across nodes with their own port", findSet("10.65.0.1,tcp:8080", "10.65.1.1,tcp:8081") != "", true},
		{"namespaceSelector + selector: only the dev client", findSet("10.65.0.3/32") != "", true},
		{"network set as member, namespace-scoped", findSet("192.0.2.0/24", "198.51.100.7/32") != "", true},
		{"global network set, both families", findSet("2001:db8::/32", "203.0.113.0/24") != "", true},
		{"multi-CIDR nets become a set", findSet("10.96.0.0/12", "172.16.0.0/12") != "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, tt.got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestBadInputSkippedAndReported: a policy in a missing tier is skipped
// and reported as a problem; an invalid policy is not skipped (Calico's
// felix skips it, which fails open when it denies) but enforced as
// denying, reported as unrenderable.
func TestBadInputSkippedAndReported(t *testing.T) {
	res := calc.Compute(ct.Input(ct.Node, ct.Scenario()))
	var got []string
	for _, p := range res.Problems {
		got = append(got, p.Kind+" "+p.Name)
	}
	if diff := cmp.Diff([]string{"GlobalNetworkPolicy missing-tier.p"}, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s\nall: %v", diff, res.Problems)
	}
	got = nil
	for _, u := range res.Unrenderable {
		if u.Reason == calc.ReasonInvalidPolicy && u.Handling == calc.Denied && u.Rule == -1 {
			got = append(got, u.Kind+" "+u.Name)
		}
	}
	if diff := cmp.Diff([]string{"NetworkPolicy bad-port", "NetworkPolicy bad-selector"}, got); diff != "" {
		t.Errorf("invalid policies reported (-want +got):\n%s\nall: %v", diff, res.Unrenderable)
	}
	for id := range res.Policies {
		if strings.HasPrefix(id.Name, "missing") {
			t.Errorf("policy %s in a missing tier is active", id)
		}
	}
}

// TestInvalidPolicyFailsClosed: a policy that fails validation (here an
// Allow rule's port range upside down, stored past the API's
// validation) denies, in its directions, all traffic of the endpoints
// its selector picks, at its place in the tier; an endpoint it does not
// select keeps its other policies.
func TestInvalidPolicyFailsClosed(t *testing.T) {
	allow := ct.NP("prod", "allow-all", ct.Ptr(10.0), "all()", ct.Ingress, []v3.Rule{{Action: v3.Allow}}, nil)
	bad := ct.NP("prod", "bad", ct.Ptr(5.0), "app == 'web'", ct.Both, []v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP"),
		Destination: v3.EntityRule{Ports: []numorstring.Port{{MinPort: 90, MaxPort: 80}}}}}, nil)
	web := ct.WEP("prod", "web", ct.Node, "caliweb", "10.0.0.9", map[string]string{"app": "web"})
	db := ct.WEP("prod", "db", ct.Node, "calidb", "10.0.0.10", map[string]string{"app": "db"})
	res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), allow, bad, web, db}))
	id := calc.PolicyID{Tier: "default", Namespace: "prod", Name: "bad"}
	p := res.Policies[id]
	if p == nil || len(p.Ingress) != 1 || p.Ingress[0].Action != v3.Deny || len(p.Egress) != 1 || p.Egress[0].Action != v3.Deny {
		t.Fatalf("the invalid policy = %+v, want one Deny rule each way", p)
	}
	policies := func(ep calc.Endpoint, dir []calc.TierPolicies) []string {
		var out []string
		for _, tp := range dir {
			for _, id := range tp.Policies {
				out = append(out, id.Name)
			}
		}
		return out
	}
	for _, ep := range res.Endpoints {
		wantIn, wantOut := []string{"allow-all"}, []string(nil)
		if strings.Contains(ep.Key, "-web-") { // the key is the WorkloadEndpoint name
			wantIn, wantOut = []string{"bad", "allow-all"}, []string{"bad"}
		}
		if diff := cmp.Diff(wantIn, policies(ep, ep.Ingress)); diff != "" {
			t.Errorf("%s ingress policies (-want +got):\n%s", ep.Key, diff)
		}
		if diff := cmp.Diff(wantOut, policies(ep, ep.Egress)); diff != "" {
			t.Errorf("%s egress policies (-want +got):\n%s", ep.Key, diff)
		}
	}
}

func TestMissingProfileReported(t *testing.T) {
	w := ct.WEP("prod", "x", ct.Node, "calix", "10.0.0.9", nil)
	res := calc.Compute(ct.Input(ct.Node, []any{w}))
	if len(res.Problems) != 1 || !strings.Contains(res.Problems[0].Reason, "kns.prod") {
		t.Fatalf("problems = %v, want the missing profile", res.Problems)
	}
	if len(res.Endpoints) != 1 || len(res.Endpoints[0].Profiles) != 0 {
		t.Fatalf("endpoint = %+v, want present with no profiles", res.Endpoints)
	}
}

func TestDuplicateResolvedByResourceVersion(t *testing.T) {
	a := ct.NP("prod", "p", nil, "all()", ct.Ingress, []v3.Rule{{Action: v3.Allow}}, nil)
	b := ct.NP("prod", "p", nil, "all()", ct.Ingress, []v3.Rule{{Action: v3.Deny}}, nil)
	a.ResourceVersion, b.ResourceVersion = "5", "7"
	w := ct.WEP("prod", "x", ct.Node, "calix", "10.0.0.9", nil)
	for _, order := range [][]any{{a, b, w}, {b, a, w}} {
		res := calc.Compute(ct.Input(ct.Node, order))
		p := res.Policies[calc.PolicyID{Tier: "default", Namespace: "prod", Name: "p"}]
		if p == nil || p.Ingress[0].Action != v3.Deny {
			t.Fatalf("want the resourceVersion-7 policy (Deny), got %+v", p)
		}
	}
}

// TestRemoteEndpointBadFieldsIgnored: a remote endpoint is not validated
// as a whole (its interface name never reaches a rule), but a port that
// could not go into an ipset is dropped and a bad IP skips it.
func TestRemoteEndpointBadFieldsIgnored(t *testing.T) {
	remote := ct.WEP("prod", "r", "node2", "not a valid iface!", "10.0.0.7", map[string]string{"app": "web"})
	remote.Spec.Ports = []v3.WorkloadEndpointPort{
		{Name: "http", Protocol: numorstring.ProtocolFromString("ICMP"), Port: 80},
		{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 0},
	}
	badIP := ct.WEP("prod", "b", "node2", "calib", "10.0.0.8", map[string]string{"app": "web"})
	badIP.Spec.IPNetworks = []string{"not-an-ip"}
	local := ct.WEP("prod", "l", ct.Node, "calil", "10.0.0.9", map[string]string{"app": "web"})
	pol := ct.NP("prod", "p", nil, "app == 'web'", ct.Ingress, []v3.Rule{{Action: v3.Allow, Protocol: ct.Proto("TCP"),
		Source: v3.EntityRule{Selector: "app == 'web'"}, Destination: v3.EntityRule{Ports: ct.Ports("http")}}}, nil)
	res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), remote, badIP, local, pol}))
	var sel, named *calc.IPSet
	for _, s := range res.IPSets {
		if s.Type == calc.HashNet {
			sel = s
		} else {
			named = s
		}
	}
	if sel == nil || !slices.Equal(sel.Members.Slice(), []string{"10.0.0.7/32", "10.0.0.9/32"}) {
		t.Errorf("selector set = %+v, want the remote and local endpoints", sel)
	}
	if named == nil || named.Members.Len() != 0 {
		t.Errorf("named-port set = %+v, want empty (no usable port)", named)
	}
	if len(res.Problems) != 1 || res.Problems[0].Name != "node2-k8s-b-eth0" {
		t.Errorf("problems = %v, want only the bad IP", res.Problems)
	}
}

// TestNamedPortAnyProtocol: a named port in a rule without protocol (a
// ClusterNetworkPolicy's destinationNamedPort) selects that port name of
// every port protocol, as Calico's ProtocolAny named-port sets.
func TestNamedPortAnyProtocol(t *testing.T) {
	w := ct.WEP("prod", "w", ct.Node, "caliw", "10.0.0.9", map[string]string{"app": "web"})
	w.Spec.Ports = []v3.WorkloadEndpointPort{
		{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: 8080},
		{Name: "http", Protocol: numorstring.ProtocolFromString("UDP"), Port: 5353},
		{Name: "dns", Protocol: numorstring.ProtocolFromString("UDP"), Port: 53},
	}
	pol := ct.GNP("p", "default", nil, "app == 'web'", ct.Ingress, []v3.Rule{{Action: v3.Allow,
		Destination: v3.EntityRule{Ports: ct.Ports("http")}}}, nil)
	res := calc.Compute(ct.Input(ct.Node, []any{ct.NSProfile("prod", nil), w, pol}))
	var named *calc.IPSet
	for _, s := range res.IPSets {
		if s.Type == calc.HashIPPort {
			named = s
		}
	}
	if named == nil || !slices.Equal(named.Members.Slice(), []string{"10.0.0.9,tcp:8080", "10.0.0.9,udp:5353"}) {
		t.Errorf("named-port set = %+v, want the tcp and udp ports named http", named)
	}
	if len(res.Unrenderable) != 0 {
		t.Errorf("unrenderable: %+v", res.Unrenderable)
	}
}

// TestHostPolicyKinds: Calico's split of a host endpoint's policies by
// kind, and that workloads take only normal policies.
func TestHostPolicyKinds(t *testing.T) {
	allow := []v3.Rule{{Action: v3.Allow}}
	objs := []any{
		ct.NSProfile("prod", nil),
		ct.WEP("prod", "w", ct.Node, "caliw", "10.65.0.1", map[string]string{"x": "1"}),
		ct.HEP("eth0", ct.Node, "eth0", map[string]string{"x": "1"}),
		ct.HEP("all", ct.Node, "*", map[string]string{"x": "1"}),
		ct.GNP("normal", "default", ct.Ptr(1.0), "has(x)", ct.Both, allow, allow),
		ct.HostPolicy(ct.GNP("fwd", "default", ct.Ptr(2.0), "has(x)", ct.Both, allow, allow), true, false, false),
		ct.HostPolicy(ct.GNP("pre", "default", ct.Ptr(3.0), "has(x)", ct.Ingress, allow, nil), false, true, false),
		ct.HostPolicy(ct.GNP("untracked", "default", ct.Ptr(4.0), "has(x)", ct.Both, allow, allow), false, false, true),
	}
	res := calc.Compute(ct.Input(ct.Node, objs))
	if len(res.Problems) > 0 {
		t.Fatalf("problems: %v", res.Problems)
	}
	names := func(tps []calc.TierPolicies) (out []string) {
		for _, tp := range tps {
			for _, p := range tp.Policies {
				out = append(out, p.Name)
			}
		}
		return out
	}
	w, eth0, all := endpoint(t, res, "prod/node1-k8s-w-eth0"), endpoint(t, res, "eth0"), endpoint(t, res, "all")
	tests := []struct {
		name      string
		got, want []string
	}{
		{"workload ingress: normal policies only", names(w.Ingress), []string{"normal", "fwd"}},
		{"workload: no forward/preDNAT/untracked lists", append(append(names(w.ForwardIngress), names(w.PreDNATIngress)...), names(w.UntrackedIngress)...), nil},
		{"hep ingress: normal and applyOnForward", names(eth0.Ingress), []string{"normal", "fwd"}},
		{"hep egress: normal and applyOnForward", names(eth0.Egress), []string{"normal", "fwd"}},
		{"hep forward: applyOnForward only", names(eth0.ForwardIngress), []string{"fwd"}},
		{"hep forward egress", names(eth0.ForwardEgress), []string{"fwd"}},
		{"hep preDNAT (ingress only)", names(eth0.PreDNATIngress), []string{"pre"}},
		{"hep untracked ingress", names(eth0.UntrackedIngress), []string{"untracked"}},
		{"hep untracked egress", names(eth0.UntrackedEgress), []string{"untracked"}},
		{"* hep: no untracked policy (as Calico)", append(names(all.UntrackedIngress), names(all.UntrackedEgress)...), nil},
		{"* hep: preDNAT applies", names(all.PreDNATIngress), []string{"pre"}},
	}
	for _, tt := range tests {
		if diff := cmp.Diff(tt.want, tt.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}
