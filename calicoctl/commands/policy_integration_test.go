//go:build integration

package commands

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// testPolicyTrace runs policy trace, show and chain against either
// datastore with one golden transcript: pods (a Kubernetes Pod, or in
// etcd mode the WorkloadEndpoint kube-controllers would write for it),
// their namespace and service-account profiles, a Kubernetes
// NetworkPolicy (knp.default.*), a tier with Pass, a Calico policy with a
// service-account rule and a staged policy.
func testPolicyTrace(t *testing.T, b cliBackend) {
	w := newWorld(t, b)
	pods := []*corev1.Pod{tracePod("client", "10.70.0.1"), tracePod("server", "10.70.0.2"), tracePod("db", "10.70.0.3")}
	knp := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "db-ingress"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "server"}}}}}}}}
	td := "testdata/cli/trace/"
	// What the scenario makes is removed afterwards, so later scenarios
	// (e.g. output's listings) see the datastore as before.
	t.Cleanup(func() {
		// The tier is the file's first document: it can go only once its
		// policies are gone, so the second pass removes it.
		b.run(t, "", "delete", "--skip-not-exists", "-f", td+"policies.yaml")
		if out, code := b.run(t, "", "delete", "--skip-not-exists", "-f", td+"policies.yaml"); code != 0 {
			t.Errorf("cleaning up the trace policies: %s", out)
		}
		if w.kube != nil {
			for _, p := range pods {
				_ = w.kube.CoreV1().Pods("default").Delete(w.ctx, p.Name, metav1.DeleteOptions{})
			}
			_ = w.kube.NetworkingV1().NetworkPolicies("default").Delete(w.ctx, knp.Name, metav1.DeleteOptions{})
		}
	})
	if w.kube != nil {
		for _, p := range pods {
			if _, err := w.kube.CoreV1().Pods("default").Create(w.ctx, p, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.kube.NetworkingV1().NetworkPolicies("default").Create(w.ctx, knp, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else {
		plantEtcdWorkloads(t, w, pods, knp)
	}
	cliScenario(t, b, "policy-trace", []step{
		{args: args("apply -f " + td + "policies.yaml")},
		{args: args("policy trace --from default/client --to default/server --port tcp/80")},
		{args: args("policy trace --from default/client --to default/server --port tcp/81")},
		{args: args("policy trace --from default/client --to default/server --port tcp/81 --with-file " + td + "what-if.yaml -o yaml")},
		{args: args("policy trace --from default/server --to 10.70.0.3 --port udp/53")},
		{args: args("policy trace --from default/client --to default/db --port tcp/5432")},
		{args: args("policy trace --from 192.0.2.1 --to default/server --port tcp/80 -o json")},
		{args: args("policy show default/server")},
		{args: args("policy show default/db -o yaml")},
		{args: args("policy chain " + rules.PolicyChainName(rules.PrefixPolicyIn, calc.PolicyID{Tier: "default", Namespace: "default", Name: "server-allow"}))},
		{args: args("policy chain cali-pri-kns.default")},
		{args: args("policy chain cali-pi-nothing"), wantCode: 1},
		{args: args("policy trace --from default/nobody --to default/server --port tcp/80"), wantCode: 1},
		{args: args("policy trace --from default/client --to default/server --port tcp"), wantCode: 1},
	})
}

// tracePod is a scheduled pod of the default namespace with Calico's
// podIP annotation.
func tracePod(name, ip string) *corev1.Pod {
	no := false
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"app": name},
			Annotations: map[string]string{"cni.projectcalico.org/podIP": ip + "/32"}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "default", AutomountServiceAccountToken: &no,
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
	}
}

// plantEtcdWorkloads writes, in etcd mode, what kube-controllers writes
// for the pods, their namespace and service account, and the Kubernetes
// policy (the same conversions the Kubernetes datastore serves).
func plantEtcdWorkloads(t *testing.T, w *world, pods []*corev1.Pod, knp *networkingv1.NetworkPolicy) {
	ns, err := kdd.NamespaceToProfile(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default",
		Labels: map[string]string{"kubernetes.io/metadata.name": "default"}}})
	if err != nil {
		t.Fatal(err)
	}
	sa, err := kdd.ServiceAccountToProfile(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "default"}})
	if err != nil {
		t.Fatal(err)
	}
	np, err := kdd.K8sNetworkPolicyToCalico(knp)
	if err != nil {
		t.Fatal(err)
	}
	objs := []v3.Resource{ns, sa, np}
	for _, p := range pods {
		wep, _, err := kdd.PodToWorkloadEndpoint(p)
		if err != nil {
			t.Fatal(err)
		}
		objs = append(objs, wep)
	}
	t.Cleanup(func() {
		for _, o := range objs {
			if _, err := w.c.Delete(w.ctx, datastore.KeyOf(o), datastore.DeleteOptions{}); err != nil {
				t.Errorf("cleaning up %s: %v", o.GetName(), err)
			}
		}
	})
	for _, o := range objs {
		o.SetResourceVersion("")
		o.SetUID("")
		o.SetCreationTimestamp(metav1.Time{})
		if _, err := w.c.Create(w.ctx, o); err != nil {
			t.Fatalf("creating %s: %v", o.GetName(), err)
		}
	}
}
