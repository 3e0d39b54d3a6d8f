//go:build privileged && integration

package e2e

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	v3 "github.com/tabbynet/tabby/api/v3"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
)

// TestPrivilegedKubernetesNetworkPolicy runs felix in Kubernetes datastore
// mode against a real kube-apiserver: Namespaces, a ServiceAccount and
// Pods (bound to this node, with Calico's CNI IP annotations, so the kdd
// backend derives their WorkloadEndpoints and the kns./ksa. profiles) and
// real networking.k8s.io/v1 NetworkPolicies are written through the
// clientset; the daemon follows them through kdd's informer syncer and
// programs the node namespace, and real TCP and UDP connections between
// pod namespaces prove each state as policies are created, changed and
// deleted.
//
// The API server listens on the test's own loopback; the daemon's client
// runs in the test process and programs the node namespace through
// dataplane.ExecRunner (commands started inside the namespace), so nothing inside a namespace needs to
// reach the server.
func TestPrivilegedKubernetesNetworkPolicy(t *testing.T) { forEachMode(t, testKubernetesNetworkPolicy) }

func testKubernetesNetworkPolicy(t *testing.T, mode string) {
	started := time.Now()
	felixBin := buildFelix(t)
	n := startKDDNode(t)
	kube, client, ctx := n.kube, n.client, n.ctx

	// The cluster: namespaces prod (team=a) and dev (team=b); web and db in
	// prod, client (service account tester) and other in dev. Pod
	// namespaces are wired like Calico's CNI, with the host-side veth name
	// Calico derives from the pod (kdd.VethName).
	for ns, team := range map[string]string{"prod": "a", "dev": "b"} {
		n.namespace(ns, map[string]string{"team": team})
	}
	if _, err := kube.CoreV1().ServiceAccounts("dev").Create(ctx, &corev1.ServiceAccount{
		ObjectMeta: metav1.ObjectMeta{Name: "tester", Labels: map[string]string{"role": "tester"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kubePod := n.pod
	web := kubePod("prod", "web", "10.65.0.1", "", corev1.ContainerPort{Name: "http", ContainerPort: tcpPortA, Protocol: corev1.ProtocolTCP})
	db := kubePod("prod", "db", "10.65.0.2", "")
	cli := kubePod("dev", "client", "10.65.0.3", "tester")
	other := kubePod("dev", "other", "10.65.0.4", "")

	// The daemon, with the syncer cmd/felix picks for a kdd client.
	dp, metrics, stopDaemon := n.runDaemon(mode)

	nps := kube.NetworkingV1().NetworkPolicies
	create := func(np *networkingv1.NetworkPolicy) {
		t.Helper()
		if _, err := nps(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating %s/%s: %v", np.Namespace, np.Name, err)
		}
	}
	update := func(ns, name string, change func(*networkingv1.NetworkPolicySpec)) {
		t.Helper()
		np, err := nps(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(&np.Spec)
		if _, err := nps(ns).Update(ctx, np, metav1.UpdateOptions{}); err != nil {
			t.Fatalf("updating %s/%s: %v", ns, name, err)
		}
	}
	remove := func(ns, name string) {
		t.Helper()
		if err := nps(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s/%s: %v", ns, name, err)
		}
	}
	expect := func(step string, checks ...check) { t.Helper(); expectFates(t, step, checks...) }
	tcp := func(from, to *pod, port int) func() bool { return func() bool { return from.tcp(to, port) } }
	udp := func(from, to *pod) func() bool { return func() bool { return from.udp(to) } }
	proto := func(p corev1.Protocol) *corev1.Protocol { return &p }
	port := func(p intstr.IntOrString) *intstr.IntOrString { return &p }
	selector := func(kv ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	policy := func(ns, name string, podSel *metav1.LabelSelector, types ...networkingv1.PolicyType) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: *podSel, PolicyTypes: types}}
	}
	ingress, egress := networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress

	expect("no policy: programmed, and the namespace profiles allow everything",
		check{"dataplane in sync", dp.InSync, true},
		check{"client->web tcp", tcp(cli, web, tcpPortA), true},
		check{"client->web udp", udp(cli, web), true},
		check{"db->web tcp", tcp(db, web, tcpPortB), true},
		check{"web->client tcp", tcp(web, cli, tcpPortA), true},
	)

	create(policy("prod", "default-deny-ingress", selector(), ingress))
	expect("default-deny ingress in prod",
		check{"client->web tcp denied", tcp(cli, web, tcpPortA), false},
		check{"client->web udp denied", udp(cli, web), false},
		check{"db->web tcp denied (same namespace)", tcp(db, web, tcpPortA), false},
		check{"web->client tcp allowed (prod egress and dev ingress untouched)", tcp(web, cli, tcpPortA), true},
	)

	// podSelector + namespaceSelector in one peer (AND), on the pod's named
	// port "http".
	allowClient := policy("prod", "allow-client", selector("app", "web"), ingress)
	allowClient.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From:  []networkingv1.NetworkPolicyPeer{{PodSelector: selector("app", "client"), NamespaceSelector: selector("team", "b")}},
		Ports: []networkingv1.NetworkPolicyPort{{Port: port(intstr.FromString("http"))}},
	}}
	create(allowClient)
	expect("podSelector + namespaceSelector on the named port http",
		check{"client->web:http allowed", tcp(cli, web, tcpPortA), true},
		check{"client->web:9090 denied (not the named port)", tcp(cli, web, tcpPortB), false},
		check{"client->web udp denied", udp(cli, web), false},
		check{"db->web:http denied (namespace team=a)", tcp(db, web, tcpPortA), false},
		check{"other->web:http denied (team=b, but app=other)", tcp(other, web, tcpPortA), false},
		check{"client->db:8080 denied (db not selected)", tcp(cli, db, tcpPortA), false},
	)

	update("prod", "allow-client", func(s *networkingv1.NetworkPolicySpec) {
		end := int32(9100)
		s.Ingress[0].Ports = append(s.Ingress[0].Ports,
			networkingv1.NetworkPolicyPort{Protocol: proto(corev1.ProtocolTCP), Port: port(intstr.FromInt32(9000)), EndPort: &end})
	})
	expect("policy changed: port range 9000-9100 (endPort) added",
		check{"client->web:9090 allowed (in 9000-9100)", tcp(cli, web, tcpPortB), true},
		check{"client->web:http still allowed", tcp(cli, web, tcpPortA), true},
		check{"client->web udp still denied", udp(cli, web), false},
		check{"db->web:9090 still denied", tcp(db, web, tcpPortB), false},
	)

	dbPolicy := policy("prod", "db-from-block", selector("app", "db"), ingress)
	dbPolicy.Spec.Ingress = []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.65.0.0/24", Except: []string{"10.65.0.3/32"}}}},
		Ports: []networkingv1.NetworkPolicyPort{
			{Protocol: proto(corev1.ProtocolUDP), Port: port(intstr.FromInt32(udpPort))},
			{Protocol: proto(corev1.ProtocolTCP), Port: port(intstr.FromInt32(tcpPortA))},
		},
	}}
	create(dbPolicy)
	expect("ipBlock 10.65.0.0/24 except 10.65.0.3/32 into db",
		check{"web->db tcp:8080 allowed (in the block)", tcp(web, db, tcpPortA), true},
		check{"web->db udp allowed", udp(web, db), true},
		check{"web->db tcp:9090 denied (port not listed)", tcp(web, db, tcpPortB), false},
		check{"client->db tcp:8080 denied (excepted)", tcp(cli, db, tcpPortA), false},
		check{"client->db udp denied (excepted)", udp(cli, db), false},
	)

	create(policy("dev", "default-deny-egress", selector(), egress))
	expect("default-deny egress in dev",
		check{"client->web:http denied (client's egress)", tcp(cli, web, tcpPortA), false},
		check{"client->web udp denied", udp(cli, web), false},
		check{"web->client tcp allowed (dev ingress open, replies established)", tcp(web, cli, tcpPortA), true},
	)

	// No policyTypes and an egress rule: the API server defaults the types
	// to [Ingress, Egress], so the client's ingress becomes default-deny.
	remove("dev", "default-deny-egress")
	clientEgress := policy("dev", "client-egress", selector("app", "client"))
	clientEgress.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{
		To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: selector("team", "a")}},
		Ports: []networkingv1.NetworkPolicyPort{{Protocol: proto(corev1.ProtocolTCP), Port: port(intstr.FromInt32(tcpPortA))}},
	}}
	create(clientEgress)
	expect("egress-only rules without policyTypes: Ingress and Egress both apply",
		check{"client->web:8080 allowed (egress to team=a on 8080)", tcp(cli, web, tcpPortA), true},
		check{"client->web:9090 denied (egress rule is 8080 only)", tcp(cli, web, tcpPortB), false},
		check{"web->client tcp denied (implied Ingress type, no ingress rules)", tcp(web, cli, tcpPortA), false},
	)

	update("dev", "client-egress", func(s *networkingv1.NetworkPolicySpec) {
		s.PolicyTypes = []networkingv1.PolicyType{egress}
	})
	expect("policyTypes changed to [Egress]: the client's ingress opens again",
		check{"web->client tcp allowed", tcp(web, cli, tcpPortA), true},
		check{"client->web:9090 still denied by egress", tcp(cli, web, tcpPortB), false},
	)

	remove("prod", "default-deny-ingress")
	remove("prod", "allow-client")
	remove("dev", "client-egress")
	expect("policies deleted: web open again; db keeps its ipBlock policy",
		check{"client->web:9090 allowed", tcp(cli, web, tcpPortB), true},
		check{"client->web udp allowed", udp(cli, web), true},
		check{"db->web tcp allowed", tcp(db, web, tcpPortA), true},
		check{"client->db tcp still denied (excepted)", tcp(cli, db, tcpPortA), false},
	)

	if n := testutil.ToFloat64(metrics.Problems); n != 0 {
		t.Errorf("felix_calc_bad_input = %v, want 0: every converted policy must be valid", n)
	}

	// Hand the node over to the real cmd/felix binary in Kubernetes mode
	// (FELIX_DATASTORETYPE=kubernetes, KUBECONFIG): it must report ready
	// and then follow the API server like the in-process daemon did.
	stopDaemon()
	ready := startFelix(t, felixBin(), n.kubeconfig, n.ns.Path(), mode)
	expect("cmd/felix (Kubernetes mode) ready over the programmed node",
		check{"/readiness", ready, true},
		check{"client->db tcp still denied (excepted)", tcp(cli, db, tcpPortA), false},
		check{"web->db tcp allowed", tcp(web, db, tcpPortA), true},
	)
	create(policy("dev", "default-deny-ingress", selector(), ingress))
	remove("prod", "db-from-block")
	expect("cmd/felix follows: dev default-deny ingress created, db's policy deleted",
		check{"web->client tcp denied", tcp(web, cli, tcpPortA), false},
		check{"web->client udp denied", udp(web, cli), false},
		check{"client->db tcp allowed", tcp(cli, db, tcpPortA), true},
		check{"client->db udp allowed", udp(cli, db), true},
	)

	// A Calico GlobalNetworkPolicy, stored as its CRD through the kdd
	// client, matching the client by its ServiceAccount's labels (the
	// ksa.dev.tester profile the kdd backend derives).
	gnp := ct.GNP("deny-testers-to-db", v3.DefaultTierName, ct.Ptr(10.0), "app == 'db'", ct.Ingress, []v3.Rule{
		{Action: v3.Deny, Source: v3.EntityRule{ServiceAccounts: &v3.ServiceAccountMatch{Selector: "role == 'tester'"}}},
		{Action: v3.Allow},
	}, nil)
	if _, err := client.Create(ctx, gnp); err != nil {
		t.Fatal(err)
	}
	expect("cmd/felix: GlobalNetworkPolicy CRD with a service-account selector",
		check{"client->db tcp denied (service account role=tester)", tcp(cli, db, tcpPortA), false},
		check{"client->db udp denied", udp(cli, db), false},
		check{"other->db tcp allowed (no service account)", tcp(other, db, tcpPortA), true},
		check{"web->db tcp allowed", tcp(web, db, tcpPortB), true},
	)
	t.Logf("total %v", time.Since(started).Round(time.Millisecond))
}

// buildFelix starts building cmd/felix in the background (it overlaps
// with the API server's start) and returns a wait for the binary's path.
func buildFelix(t testing.TB) func() string {
	bin := filepath.Join(t.TempDir(), "felix")
	res := make(chan error, 1)
	start := time.Now()
	go func() {
		out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin,
			"github.com/tabbynet/tabby/felix/cmd/felix").CombinedOutput()
		if err != nil {
			err = fmt.Errorf("building cmd/felix: %w\n%s", err, out)
		}
		res <- err
	}()
	wait := sync.OnceValue(func() error { return <-res })
	t.Cleanup(func() { _ = wait() })
	return func() string {
		t.Helper()
		if err := wait(); err != nil {
			t.Fatal(err)
		}
		t.Logf("cmd/felix binary ready %v after the test started", time.Since(start).Round(time.Millisecond))
		return bin
	}
}

// startFelix runs the felix binary in Kubernetes datastore mode for node,
// programming the namespace at netnsPath (TABBY_FELIX_NETNS), with its
// health server on a free loopback port of the test's own namespace. It
// stops the process (SIGTERM) at cleanup and returns a probe of
// /readiness.
func startFelix(t *testing.T, bin, kubeconfig, netnsPath, mode string) func() bool {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	healthPort := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()

	var logs bytes.Buffer
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(),
		"FELIX_DATASTORETYPE=kubernetes", "KUBECONFIG="+kubeconfig, "FELIX_FELIXHOSTNAME="+node,
		"TABBY_FELIX_NETNS="+netnsPath, "FELIX_IPV6SUPPORT=false", "FELIX_IPTABLESREFRESHINTERVAL=5",
		"FELIX_HEALTHENABLED=true", "FELIX_HEALTHHOST=127.0.0.1", "FELIX_HEALTHPORT="+strconv.Itoa(healthPort),
		"FELIX_PROMETHEUSMETRICSENABLED=false", "FELIX_LOGSEVERITYSCREEN=Warning",
		"FELIX_ENDPOINTSTATUSPATHPREFIX="+t.TempDir(), "TABBY_FELIX_MTU_FILE="+filepath.Join(t.TempDir(), "mtu"),
		"FELIX_NFTABLESMODE="+nftablesModeOf(mode))
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("cmd/felix exited with %v", err)
			}
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("cmd/felix did not stop within 10s of SIGTERM")
		}
		if t.Failed() || logs.Len() > 0 {
			t.Logf("cmd/felix output:\n%s", logs.String())
		}
	})
	hc := &http.Client{Timeout: time.Second}
	url := fmt.Sprintf("http://127.0.0.1:%d/readiness", healthPort)
	return func() bool {
		resp, err := hc.Get(url)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusNoContent
	}
}
