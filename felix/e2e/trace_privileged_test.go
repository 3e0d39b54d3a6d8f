//go:build privileged && integration

package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/calicoctl/commands"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// tracePolicies are the policy side of TestPrivilegedTraceMatchesPackets:
// three tiers (platform passes what it does not decide, security denies
// what it does not pass), a blocked GlobalNetworkSet, partners by
// GlobalNetworkSet, a NetworkSet selected across namespaces, a
// service-account rule, a named port, a Kubernetes NetworkPolicy, a
// profile that denies before the namespace's, an all-interfaces host
// endpoint with normal, applyOnForward and preDNAT policy, a host
// endpoint on eth2 with doNotTrack policy, and a staged
// deny.
func tracePolicies(t *testing.T) []v3.Resource {
	tcp, udp := ct.Proto("TCP"), ct.Proto("UDP")
	port := func(p string) []numorstring.Port { return ct.Ports(p) }
	k8s := `projectcalico.org/orchestrator == 'k8s'`
	knp, err := kdd.K8sNetworkPolicyToCalico(&networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "db-allow"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "backend"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &intstr.IntOrString{IntVal: tcpPortB}}},
			}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	quarantine := &v3.Profile{TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "quarantine"},
		Spec:       v3.ProfileSpec{Ingress: []v3.Rule{{Action: v3.Deny, Protocol: tcp, Destination: v3.EntityRule{Ports: port("9090")}}}}}
	staged := &v3.StagedNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindStagedNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "lockdown"},
		Spec: v3.StagedNetworkPolicySpec{StagedAction: v3.StagedActionSet, Tier: "default", Selector: "app == 'tester'",
			Types: ct.Ingress, Ingress: []v3.Rule{{Action: v3.Deny}}}}
	return []v3.Resource{
		quarantine, staged, knp,
		ct.GlobalNetSet("blocked", map[string]string{"role": "blocked"}, "10.65.0.6/32"),
		ct.GlobalNetSet("partners", map[string]string{"role": "partner"}, "192.168.51.0/24"),
		ct.NetSet("dev", "dev-tools", map[string]string{"tool": "yes"}, "10.65.0.3/32"),
		ct.Tier("platform", 50, v3.Pass),
		ct.Tier("security", 100, v3.Deny),
		ct.GNP("db-from-tester", "platform", ct.Ptr(1.0), "app == 'db'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Nets: []string{"10.65.0.3/32"}}, Destination: v3.EntityRule{Ports: port("8080")}}}, nil),
		ct.GNP("sec", "security", ct.Ptr(1.0), k8s, ct.Both, []v3.Rule{
			{Action: v3.Deny, Source: v3.EntityRule{Selector: "role == 'blocked'"}},
			{Action: v3.Pass, Source: v3.EntityRule{Nets: []string{"10.65.0.0/16"}}},
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Selector: "role == 'partner'"}, Destination: v3.EntityRule{Ports: port("8080")}},
		}, []v3.Rule{
			{Action: v3.Deny, Protocol: tcp, Destination: v3.EntityRule{Nets: []string{"192.168.51.2/32"}, Ports: port("9090")}},
			{Action: v3.Pass},
		}),
		ct.NP("shop", "default-deny", ct.Ptr(1000.0), "all()", ct.Ingress, nil, nil),
		ct.NP("shop", "backend-allow", ct.Ptr(100.0), "app == 'backend'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Selector: "app == 'frontend'"}, Destination: v3.EntityRule{Ports: port("http")}}}, nil),
		ct.NP("shop", "dev-tools", ct.Ptr(100.0), "all()", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: udp, Source: v3.EntityRule{Selector: "tool == 'yes'", NamespaceSelector: "team == 'dev'"}}}, nil),
		ct.NP("shop", "ops-monitor", ct.Ptr(200.0), "all()", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{NamespaceSelector: "team == 'ops'",
				ServiceAccounts: &v3.ServiceAccountMatch{Names: []string{"prometheus"}}}, Destination: v3.EntityRule{Ports: port("9090")}}}, nil),
		ct.HEP("node1-all", node, "*", map[string]string{"role": "node"}, nodeIPOn(0)),
		ct.GNP("host-ingress", "default", ct.Ptr(500.0), "role == 'node'", ct.Ingress, []v3.Rule{
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Nets: []string{"192.168.51.0/24"}}, Destination: v3.EntityRule{Ports: port("8081")}}}, nil),
		ct.HostPolicy(ct.GNP("forward-in", "default", ct.Ptr(100.0), "role == 'node'", ct.Ingress, []v3.Rule{
			{Action: v3.Deny, Protocol: tcp, Destination: v3.EntityRule{Nets: []string{"10.65.0.0/16"}, Ports: port("9090")}},
			{Action: v3.Allow, Destination: v3.EntityRule{Nets: []string{"10.65.0.0/16"}}},
		}, nil), true, false, false),
		ct.HEP("node1-eth2", node, "eth2", map[string]string{"role": "edge"}, nodeIPOn(1)),
		ct.HostPolicy(ct.GNP("untracked-8083", "default", ct.Ptr(10.0), "role == 'edge'", ct.Both, []v3.Rule{
			{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Nets: []string{"192.168.52.2/32"}}, Destination: v3.EntityRule{Ports: port("8083")}}},
			[]v3.Rule{{Action: v3.Allow, Protocol: tcp, Source: v3.EntityRule{Ports: port("8083")}, Destination: v3.EntityRule{Nets: []string{"192.168.52.2/32"}}}}),
			false, false, true),
		ct.HostPolicy(ct.GNP("pre-dnat", "default", ct.Ptr(10.0), "role == 'node'", ct.Ingress, []v3.Rule{
			{Action: v3.Deny, Protocol: tcp, Source: v3.EntityRule{Nets: []string{"192.168.51.2/32"}},
				Destination: v3.EntityRule{Nets: []string{"10.65.0.2/32"}, Ports: port("8080")}}}, nil), false, true, false),
	}
}

// traceProbe is one flow: how the trace names its ends, and a real
// packet's fate.
type traceProbe struct {
	from, to, port string
	probe          func() bool
	// pending, when set, is the pending verdict the staged policies give.
	pending string
}

// TestPrivilegedTraceMatchesPackets runs felix's whole pipeline over a
// real etcd on a node namespace with six pods in three namespaces, a peer
// behind eth1 and eth2, an all-interfaces host endpoint and one on eth2
// (doNotTrack), and for each of 40
// flows checks that `calicoctl policy trace` (the command, over the same
// etcd) gives the verdict the real packet gets.
func TestPrivilegedTraceMatchesPackets(t *testing.T) {
	e := testservers.StartEtcd(t)
	c, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h := newHostNet(t, "iptables", 2)
	peer := h.peers[0]
	for _, p := range []int{22, 8081, 8082, 8083, 8084} {
		listenTCP(t, h.node, p)
	}
	listenTCP(t, peer, tcpPortA)
	listenTCP(t, peer, tcpPortB)
	pods := map[string]*pod{}
	var objs []v3.Resource
	for _, p := range []struct{ ns, name, iface, ip string }{
		{"shop", "backend", "calib4ck", "10.65.0.1"}, {"shop", "db", "calidb00", "10.65.0.2"},
		{"dev", "tester", "calite57", "10.65.0.3"}, {"shop", "frontend", "califr0n", "10.65.0.4"},
		{"ops", "monitor", "calim0n1", "10.65.0.5"}, {"dev", "rogue", "calir0gu", "10.65.0.6"},
	} {
		pods[p.name] = newPod(t, h.node, p.name, p.iface, p.ip)
		w := ct.WEP(p.ns, p.name, node, p.iface, p.ip, map[string]string{"app": p.name})
		switch p.name {
		case "backend":
			w.Spec.Ports = []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("TCP"), Port: tcpPortA}}
		case "monitor":
			w.Spec.ServiceAccountName = "prometheus"
			w.Spec.Profiles = []string{"quarantine", "kns.ops"}
		}
		objs = append(objs, w)
	}
	for _, n := range []string{"dev", "shop", "ops"} {
		objs = append(objs, ct.NSProfile(n, map[string]string{"team": n}))
	}
	ctx := context.Background()
	for _, r := range append(objs, tracePolicies(t)...) {
		if _, err := c.Create(ctx, r); err != nil {
			t.Fatalf("creating %s %s: %v", r.GetObjectKind().GroupVersionKind().Kind, r.GetName(), err)
		}
	}
	dp := runDaemon(t, c, h.node, nil)
	probes := traceProbes(pods, h.peers, h.node)
	eventually(t, 20*time.Second, "policy programmed", func() bool {
		return dp.InSync() && pods["frontend"].tcp(pods["backend"], tcpPortA) && !pods["frontend"].tcp(pods["backend"], tcpPortB)
	})
	t.Setenv("DATASTORE_TYPE", "etcdv3")
	t.Setenv("ETCD_ENDPOINTS", e.Endpoint())
	checkTraces(t, probes)
}

// checkTraces traces every probe with the calicoctl command and compares
// with the packet: a disagreement is looked at again once (the dataplane
// may still be settling) before it fails the test.
func checkTraces(t *testing.T, probes []traceProbe) {
	verdicts := map[string]bool{}
	var retry []traceProbe
	counts := map[bool]int{}
	for _, p := range probes {
		rep := runTrace(t, p)
		allowed := rep.Verdict == "Allow"
		verdicts[p.from+p.to+p.port] = allowed
		counts[allowed]++
		if p.pending != "" && (rep.PendingVerdict != p.pending || !pendingNames(rep, "StagedNetworkPolicy", "lockdown", p.pending)) {
			t.Errorf("%s -> %s %s: pending verdict %q, want %q by StagedNetworkPolicy lockdown:\n%s", p.from, p.to, p.port, rep.PendingVerdict, p.pending, traceText(t, p))
		}
		if p.probe() != allowed {
			retry = append(retry, p)
		}
	}
	if counts[true] < 10 || counts[false] < 10 {
		t.Errorf("want at least 10 allowed and 10 denied flows, traced %d allowed, %d denied", counts[true], counts[false])
	}
	time.Sleep(2 * time.Second)
	for _, p := range retry {
		if got := p.probe(); got != verdicts[p.from+p.to+p.port] {
			t.Errorf("%s -> %s %s: packet allowed=%v, trace says %v:\n%s", p.from, p.to, p.port, got, verdicts[p.from+p.to+p.port], traceText(t, p))
		}
	}
	t.Logf("%d flows: %d allowed, %d denied, trace = packet for all but %d", len(probes), counts[true], counts[false], len(retry))
}

// pendingNames reports whether a hop's pending trace ends at a rule of
// the staged policy kind/name with the given action.
func pendingNames(rep commands.TraceReport, kind, name, action string) bool {
	for _, h := range rep.Hops {
		if h.Pending == nil {
			continue
		}
		for _, tier := range h.Pending.Tiers {
			for _, p := range tier.Policies {
				if p.Kind == kind && p.Name == name && p.Match != nil && p.Match.Action == action {
					return true
				}
			}
		}
	}
	return false
}

func runTrace(t *testing.T, p traceProbe) commands.TraceReport {
	out := calicoctl(t, "policy", "trace", "--from", p.from, "--to", p.to, "--port", p.port, "-o", "json")
	var rep commands.TraceReport
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("trace %s -> %s: %v\n%s", p.from, p.to, err, out)
	}
	return rep
}

func traceText(t *testing.T, p traceProbe) string {
	return calicoctl(t, "policy", "trace", "--from", p.from, "--to", p.to, "--port", p.port)
}

// calicoctl runs the calicoctl command as the binary does.
func calicoctl(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if rc := commands.Execute(args, &stdout, &stderr, dsconfig.Backends{EtcdTransport: etcdlib.New}); rc != 0 {
		t.Fatalf("calicoctl %s: exit %d: %s", strings.Join(args, " "), rc, stderr.String())
	}
	return stdout.String()
}

// traceProbes are the flows: pods by name, the peer behind eth1
// (192.168.51.2, a partner) and the node itself (192.168.51.1, host
// endpoint node1-all).
func traceProbes(pods map[string]*pod, peers []ns.NetNS, nodeNS ns.NetNS) []traceProbe {
	peer := peers[0]
	ref := map[string]string{"backend": "shop/backend", "db": "shop/db", "tester": "dev/tester",
		"frontend": "shop/frontend", "monitor": "ops/monitor", "rogue": "dev/rogue"}
	var out []traceProbe
	tcp := func(from, to string, port int) {
		out = append(out, traceProbe{from: ref[from], to: ref[to], port: fmt.Sprintf("tcp/%d", port),
			probe: func() bool { return pods[from].tcp(pods[to], port) }})
	}
	udp := func(from, to string) {
		out = append(out, traceProbe{from: ref[from], to: ref[to], port: fmt.Sprintf("udp/%d", udpPort),
			probe: func() bool { return pods[from].udp(pods[to]) }})
	}
	ping := func(from, to string) {
		out = append(out, traceProbe{from: ref[from], to: ref[to], port: "icmp",
			probe: func() bool { return pods[from].ping(pods[to], 1) }})
	}
	dial := func(from string, src ns.NetNS, to, ip string, port int) {
		if r, ok := ref[to]; ok {
			to = r
		}
		out = append(out, traceProbe{from: from, to: to, port: fmt.Sprintf("tcp/%d", port),
			probe: func() bool { return dialOK(src, ip, port) }})
	}
	// Pod to pod: named port, Kubernetes policy, network set across
	// namespaces, service accounts, blocked set, tiers with Pass, profiles.
	tcp("frontend", "backend", tcpPortA)
	tcp("frontend", "backend", tcpPortB)
	tcp("tester", "backend", tcpPortA)
	udp("tester", "backend")
	udp("frontend", "backend")
	tcp("rogue", "backend", tcpPortA)
	tcp("rogue", "tester", tcpPortA)
	tcp("tester", "rogue", tcpPortA)
	tcp("backend", "db", tcpPortB)
	tcp("backend", "db", tcpPortA)
	tcp("frontend", "db", tcpPortB)
	tcp("monitor", "db", tcpPortB)
	tcp("monitor", "backend", tcpPortB)
	tcp("monitor", "frontend", tcpPortA)
	tcp("tester", "monitor", tcpPortB)
	tcp("tester", "monitor", tcpPortA)
	udp("frontend", "monitor")
	tcp("tester", "db", tcpPortA)
	tcp("tester", "db", tcpPortB)
	tcp("db", "frontend", tcpPortA)
	ping("frontend", "tester")
	ping("rogue", "tester")
	ping("tester", "backend")
	out = append(out, traceProbe{from: "shop/backend", to: "dev/tester", port: "tcp/9090", pending: "Deny",
		probe: func() bool { return pods["backend"].tcp(pods["tester"], tcpPortB) }})
	// From outside, through the host endpoint's preDNAT and
	// applyOnForward policy.
	peerIP := peerIPOn(0)
	dial(peerIP, peer, "backend", "10.65.0.1", tcpPortA)
	dial(peerIP, peer, "backend", "10.65.0.1", tcpPortB)
	dial(peerIP, peer, "tester", "10.65.0.3", tcpPortB)
	dial(peerIP, peer, "tester", "10.65.0.3", tcpPortA)
	dial(peerIP, peer, "db", "10.65.0.2", tcpPortA)
	// To the host: host endpoint policy and failsafe.
	for _, p := range []int{8081, 8082, 22} {
		dial(peerIP, peer, nodeIPOn(0), nodeIPOn(0), p)
	}
	// To the host through eth2's host endpoint: doNotTrack allows 8083
	// (the filter table then accepts it), nothing allows 8084, failsafe.
	for _, p := range []int{8083, 8084, 22} {
		dial(peerIPOn(1), peers[1], nodeIPOn(1), nodeIPOn(1), p)
	}
	// Out of the cluster, to the host from a pod, from the host to a pod.
	dial("dev/tester", pods["tester"].netns, peerIP, peerIP, tcpPortB)
	dial("dev/tester", pods["tester"].netns, peerIP, peerIP, tcpPortA)
	dial("dev/tester", pods["tester"].netns, nodeIPOn(0), nodeIPOn(0), 8081)
	dial("hostendpoint/node1-all", nodeNS, "backend", "10.65.0.1", tcpPortB)
	tcp("backend", "tester", tcpPortA)
	return out
}
