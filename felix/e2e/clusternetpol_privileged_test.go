//go:build privileged && integration

package e2e

import (
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

// TestPrivilegedClusterNetworkPolicy runs felix in Kubernetes datastore
// mode against a real kube-apiserver with the manifests' CRDs (network-
// policy-api's ClusterNetworkPolicy among them) and proves with real TCP
// and UDP connections between pod namespaces how ClusterNetworkPolicies
// (policy.networking.k8s.io/v1alpha2, read through kdd's informer syncer
// as GlobalNetworkPolicies kcnp.<name> in tiers kube-admin and
// kube-baseline) combine with a namespace's NetworkPolicy: a Baseline Deny
// applies only to pods no NetworkPolicy selects, an Admin Deny beats the
// NetworkPolicy's Allow, an Admin Pass hands the decision down, priorities
// order Admin policies, a named port (no protocol) matches, and a rule
// that cannot be converted fails closed (counted).
func TestPrivilegedClusterNetworkPolicy(t *testing.T) { forEachMode(t, testClusterNetworkPolicy) }

func testClusterNetworkPolicy(t *testing.T, mode string) {
	started := time.Now()
	n := startKDDNode(t)
	kube, client, ctx, rc := n.kube, n.client, n.ctx, n.rc
	cnps := cnpclient.NewForConfigOrDie(rc).PolicyV1alpha2().ClusterNetworkPolicies()
	// The built-in tiers, as calico-node creates them at start-up.
	for _, tier := range v3.DefaultTiers() {
		if _, err := client.Create(ctx, tier); err != nil && !errors.Is(err, datastore.ErrAlreadyExists) {
			t.Fatalf("tier %s: %v", tier.Name, err)
		}
	}
	for ns, team := range map[string]string{"prod": "a", "dev": "b"} {
		n.namespace(ns, map[string]string{"team": team})
	}
	kubePod := func(ns, name, ip string, ports ...corev1.ContainerPort) *pod {
		return n.pod(ns, name, ip, "", ports...)
	}
	web := kubePod("prod", "web", "10.65.0.1", corev1.ContainerPort{Name: "http", ContainerPort: tcpPortA, Protocol: corev1.ProtocolTCP})
	db := kubePod("prod", "db", "10.65.0.2")
	cli := kubePod("dev", "client", "10.65.0.3")
	other := kubePod("dev", "other", "10.65.0.4")

	dp, metrics, _ := n.runDaemon(mode)
	t.Logf("API server, CRDs, pods and daemon up in %v", time.Since(started).Round(time.Millisecond))

	expect := func(step string, checks ...check) { t.Helper(); expectFates(t, step, checks...) }
	tcp := func(from, to *pod, port int) func() bool { return func() bool { return from.tcp(to, port) } }
	udp := func(from, to *pod) func() bool { return func() bool { return from.udp(to) } }
	sel := func(kv ...string) *metav1.LabelSelector {
		s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			s.MatchLabels[kv[i]] = kv[i+1]
		}
		return s
	}
	prodSubject := cnpv1.ClusterNetworkPolicySubject{Namespaces: sel("team", "a")}
	ingressCNP := func(name string, tier cnpv1.Tier, prio int32, rules ...cnpv1.ClusterNetworkPolicyIngressRule) {
		t.Helper()
		c := &cnpv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: cnpv1.ClusterNetworkPolicySpec{Tier: tier, Priority: prio, Subject: prodSubject, Ingress: rules}}
		if _, err := cnps.Create(ctx, c, metav1.CreateOptions{}); err != nil {
			t.Fatalf("creating ClusterNetworkPolicy %s: %v", name, err)
		}
	}
	fromDev := []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("team", "b")}}
	fromClient := []cnpv1.ClusterNetworkPolicyIngressPeer{{Pods: &cnpv1.NamespacedPod{NamespaceSelector: *sel("team", "b"), PodSelector: *sel("app", "client")}}}

	expect("no policy: everything allowed",
		check{"dataplane in sync", dp.InSync, true},
		check{"client->web tcp", tcp(cli, web, tcpPortA), true},
		check{"other->db tcp", tcp(other, db, tcpPortA), true},
	)

	// web is selected by a NetworkPolicy allowing dev on its named port;
	// db by none.
	http := intstr.FromString("http")
	if _, err := kube.NetworkingV1().NetworkPolicies("prod").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web-from-dev"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"), PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "b")}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: &http}}}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ingressCNP("baseline-deny-dev", cnpv1.BaselineTier, 5,
		cnpv1.ClusterNetworkPolicyIngressRule{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, From: fromDev})
	expect("Baseline Deny applies only where no NetworkPolicy selects",
		check{"other->web:http allowed (NetworkPolicy)", tcp(other, web, tcpPortA), true},
		check{"other->web:9090 denied (NetworkPolicy)", tcp(other, web, tcpPortB), false},
		check{"other->db tcp denied (Baseline)", tcp(other, db, tcpPortA), false},
		check{"other->db udp denied (Baseline)", udp(other, db), false},
		check{"web->db tcp allowed (not from dev)", tcp(web, db, tcpPortA), true},
	)

	ingressCNP("admin-deny-dev", cnpv1.AdminTier, 30,
		cnpv1.ClusterNetworkPolicyIngressRule{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny, From: fromDev})
	expect("Admin Deny beats the NetworkPolicy's Allow",
		check{"other->web:http denied", tcp(other, web, tcpPortA), false},
		check{"client->web:http denied", tcp(cli, web, tcpPortA), false},
		check{"web->db tcp allowed", tcp(web, db, tcpPortA), true},
	)

	ingressCNP("admin-pass-client", cnpv1.AdminTier, 20,
		cnpv1.ClusterNetworkPolicyIngressRule{Action: cnpv1.ClusterNetworkPolicyRuleActionPass, From: fromClient})
	expect("Admin Pass (priority 20, before the Deny at 30) hands client's traffic to the NetworkPolicy",
		check{"client->web:http allowed (NetworkPolicy)", tcp(cli, web, tcpPortA), true},
		check{"client->web:9090 denied (NetworkPolicy)", tcp(cli, web, tcpPortB), false},
		check{"client->db tcp denied (passed on to Baseline)", tcp(cli, db, tcpPortA), false},
		check{"other->web:http still denied (Admin Deny)", tcp(other, web, tcpPortA), false},
	)

	c, err := cnps.Get(ctx, "admin-pass-client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Spec.Priority = 40
	if _, err := cnps.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	expect("priority 40: the Admin Deny (30) now comes first",
		check{"client->web:http denied", tcp(cli, web, tcpPortA), false},
	)

	ingressCNP("admin-accept-http", cnpv1.AdminTier, 1,
		cnpv1.ClusterNetworkPolicyIngressRule{Action: cnpv1.ClusterNetworkPolicyRuleActionAccept, From: fromDev,
			Protocols: []cnpv1.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "http"}}})
	expect("Admin Accept to the named port http (no protocol)",
		check{"other->web:http allowed", tcp(other, web, tcpPortA), true},
		check{"other->web:9090 denied (Admin Deny)", tcp(other, web, tcpPortB), false},
		check{"other->web udp denied (no udp port named http)", udp(other, web), false},
		check{"other->db tcp:8080 denied (db has no port named http)", tcp(other, db, tcpPortA), false},
	)

	// An operator the API server's schema lets through but no selector
	// has: the Pass rule cannot be converted and denies all instead.
	count := func() float64 { return float64(datastore.UnconvertibleRules(v3.KindGlobalNetworkPolicy)) }
	before := count()
	ingressCNP("admin-bad", cnpv1.AdminTier, 2,
		cnpv1.ClusterNetworkPolicyIngressRule{Action: cnpv1.ClusterNetworkPolicyRuleActionPass,
			From: []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "team", Operator: "Near", Values: []string{"a"}}}}}}})
	expect("an unconvertible Pass rule fails closed: it denies everything reaching it",
		check{"web->db tcp denied", tcp(web, db, tcpPortA), false},
		check{"db->web udp denied", udp(db, web), false},
		check{"other->web:http allowed (Accept at priority 1 comes first)", tcp(other, web, tcpPortA), true},
		check{"web->client tcp allowed (dev has no such policy)", tcp(web, cli, tcpPortA), true},
	)
	if got := count() - before; got != 1 {
		t.Errorf("tabby_datastore_unconvertible_rules_total grew by %v, want 1", got)
	}

	// calicoctl's view (the kdd client): the converted policies.
	l, err := client.List(ctx, v3.KindGlobalNetworkPolicy, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, r := range l.Items {
		g := r.(*v3.GlobalNetworkPolicy)
		got[g.Name] = g.Spec.Tier
		if g.Name == "kcnp.admin-deny-dev" && (g.Spec.Order == nil || *g.Spec.Order != 30) {
			t.Errorf("kcnp.admin-deny-dev order %v, want 30", g.Spec.Order)
		}
	}
	for name, tier := range map[string]string{"kcnp.baseline-deny-dev": "kube-baseline", "kcnp.admin-deny-dev": "kube-admin",
		"kcnp.admin-pass-client": "kube-admin", "kcnp.admin-accept-http": "kube-admin", "kcnp.admin-bad": "kube-admin"} {
		if got[name] != tier {
			t.Errorf("GlobalNetworkPolicy %s: tier %q, want %q (listed: %v)", name, got[name], tier, got)
		}
	}
	if _, err := client.Delete(ctx, datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: "kcnp.admin-bad"}, datastore.DeleteOptions{}); err == nil {
		t.Errorf("deleting kcnp.admin-bad through the Calico API succeeded; it must be read-only")
	}

	for _, name := range []string{"admin-bad", "admin-accept-http", "admin-pass-client", "admin-deny-dev", "baseline-deny-dev"} {
		if err := cnps.Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	expect("ClusterNetworkPolicies deleted: only the NetworkPolicy remains",
		check{"web->db tcp allowed", tcp(web, db, tcpPortA), true},
		check{"other->db tcp allowed", tcp(other, db, tcpPortA), true},
		check{"client->web:http allowed", tcp(cli, web, tcpPortA), true},
		check{"client->web:9090 denied (NetworkPolicy)", tcp(cli, web, tcpPortB), false},
	)
	if bad := testutil.ToFloat64(metrics.Problems); bad != 0 {
		t.Errorf("felix_calc_bad_input = %v, want 0: every converted policy must render", bad)
	}
	t.Logf("total %v", time.Since(started).Round(time.Millisecond))
}
