//go:build integration

package kubecontrollers_test

import (
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	cnpclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationEtcdMirrors: in etcd mode a Kubernetes NetworkPolicy, a
// namespace's labels, a service account, a pod's and a node's labels reach etcd as
// Calico's kube-controllers writes them, changes and deletions follow,
// leftovers of deleted objects are removed, and resources the controllers
// do not own are never touched.
func TestIntegrationEtcdMirrors(t *testing.T) {
	c := newCluster(t, true)
	installClusterNetworkPolicyCRD(t, c)
	ctx := ctxT(t)
	c.configure(t, time.Hour, 500*time.Millisecond)
	c.createPool(t, "10.73.0.0/16")
	c.createNode(t, "node-a")
	if _, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team",
		Labels: map[string]string{"tier": "web"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.addPod(t, "team", "web-1", "node-a", map[string]string{"app": "web"})

	// Leftovers of objects deleted while no replica ran, and resources of
	// others, already in etcd.
	order := 5.0
	for _, name := range []string{"knp.default.gone", "mine"} {
		if _, err := c.ds.Create(ctx, &v3.NetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
			Spec:       v3.NetworkPolicySpec{Order: &order, Selector: "all()", Ingress: []v3.Rule{{Action: v3.Allow}}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.ds.Create(ctx, &v3.Profile{TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "kns.deleted-ns"}}); err != nil {
		t.Fatal(err)
	}

	// etcd's history compacted every 300ms meanwhile: watches must cope.
	in := c.start(t, runOpts{identity: "only", env: map[string]string{"COMPACTION_PERIOD": "300ms"}})

	get := func(k datastore.Key) (v3.Resource, error) { return c.ds.Get(ctx, k) }
	gone := func(k datastore.Key) func() (bool, error) {
		return func() (bool, error) {
			_, err := get(k)
			return errors.Is(err, datastore.ErrNotFound), err
		}
	}

	// Namespace -> Profile kns.team with the labels as pcns.*; a label change follows.
	nsKey := datastore.Key{Kind: v3.KindProfile, Name: "kns.team"}
	profileLabels := func(want map[string]string) func() (bool, error) {
		return func() (bool, error) {
			r, err := get(nsKey)
			if err != nil {
				return false, err
			}
			p := r.(*v3.Profile)
			return maps.Equal(p.Spec.LabelsToApply, want) && len(p.Spec.Ingress) == 1 && p.Spec.Ingress[0].Action == v3.Allow, nil
		}
	}
	eventually(t, "profile kns.team", profileLabels(map[string]string{"pcns.tier": "web", "pcns.projectcalico.org/name": "team", "pcns.kubernetes.io/metadata.name": "team"}))
	ns, err := c.kube.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["tier"] = "db"
	if _, err := c.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "namespace label change in kns.team", profileLabels(map[string]string{"pcns.tier": "db", "pcns.projectcalico.org/name": "team", "pcns.kubernetes.io/metadata.name": "team"}))
	eventually(t, "leftover kns.deleted-ns removed", gone(datastore.Key{Kind: v3.KindProfile, Name: "kns.deleted-ns"}))

	// NetworkPolicy -> knp.default.allow-web, converted as the Kubernetes
	// datastore serves it.
	tcp := corev1.ProtocolTCP
	port := intstrPort(80)
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-web", Namespace: "team"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}}
	created, err := c.kube.NetworkingV1().NetworkPolicies("team").Create(ctx, np, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := kdd.K8sNetworkPolicyToCalico(created)
	if err != nil {
		t.Fatal(err)
	}
	polKey := datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: "team", Name: "knp.default.allow-web"}
	eventually(t, "knp.default.allow-web in etcd", func() (bool, error) {
		r, err := get(polKey)
		if err != nil {
			return false, err
		}
		p := r.(*v3.NetworkPolicy)
		return p.Spec.Selector == want.Spec.Selector && len(p.Spec.Ingress) == 1 &&
			p.Spec.Ingress[0].Source.Selector == want.Spec.Ingress[0].Source.Selector &&
			slices.Equal(p.Spec.Types, []v3.PolicyType{v3.PolicyTypeIngress}) && *p.Spec.Order == 1000, nil
	})
	eventually(t, "leftover knp.default.gone removed", gone(datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: "team", Name: "knp.default.gone"}))
	if err := c.kube.NetworkingV1().NetworkPolicies("team").Delete(ctx, "allow-web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "knp.default.allow-web deleted with its NetworkPolicy", gone(polKey))

	// ClusterNetworkPolicy -> the GlobalNetworkPolicy kcnp.deny-team in tier
	// kube-admin, as the Kubernetes datastore serves it (the CRD is
	// network-policy-api's; tabby-etcd.yaml installs no CRDs).
	mirrorClusterNetworkPolicy(t, c)

	// Service account -> ksa.team.robot.
	if _, err := c.kube.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "robot",
		Labels: map[string]string{"k": "v"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "profile ksa.team.robot", func() (bool, error) {
		r, err := get(datastore.Key{Kind: v3.KindProfile, Name: "ksa.team.robot"})
		if err != nil {
			return false, err
		}
		return maps.Equal(r.(*v3.Profile).Spec.LabelsToApply, map[string]string{"pcsa.k": "v", "pcsa.projectcalico.org/name": "robot"}), nil
	})

	// Pod labels -> the pod's WorkloadEndpoint.
	wepName, _ := kdd.WorkloadEndpointName("node-a", "web-1", "eth0")
	wepKey := datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: "team", Name: wepName}
	wepLabels := func(want map[string]string) func() (bool, error) {
		return func() (bool, error) {
			r, err := get(wepKey)
			if err != nil {
				return false, err
			}
			return maps.Equal(r.(*v3.WorkloadEndpoint).Labels, want), nil
		}
	}
	base := map[string]string{"projectcalico.org/namespace": "team", "projectcalico.org/orchestrator": "k8s"}
	eventually(t, "pod labels on the endpoint", wepLabels(merged(base, map[string]string{"app": "web"})))
	pod, err := c.kube.CoreV1().Pods("team").Get(ctx, "web-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod.Labels = map[string]string{"app": "web", "version": "2"}
	if _, err := c.kube.CoreV1().Pods("team").Update(ctx, pod, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pod label change on the endpoint", wepLabels(merged(base, map[string]string{"app": "web", "version": "2"})))

	// Kubernetes node labels -> the Calico node (labels of others kept).
	calicoNode := func(want map[string]string) func() (bool, error) {
		return func() (bool, error) {
			r, err := get(datastore.Key{Kind: v3.KindNode, Name: "node-a"})
			if err != nil {
				return false, err
			}
			return maps.Equal(r.(*v3.Node).Labels, want), nil
		}
	}
	r, err := get(datastore.Key{Kind: v3.KindNode, Name: "node-a"})
	if err != nil {
		t.Fatal(err)
	}
	cn := r.(*v3.Node)
	cn.Labels = map[string]string{"set-by": "calicoctl"}
	if _, err := c.ds.Update(ctx, cn); err != nil {
		t.Fatal(err)
	}
	kn, err := c.kube.CoreV1().Nodes().Get(ctx, "node-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kn.Labels = map[string]string{"zone": "a", "rack": "1"}
	if kn, err = c.kube.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node labels on the Calico node", calicoNode(map[string]string{"set-by": "calicoctl", "zone": "a", "rack": "1"}))
	delete(kn.Labels, "rack")
	if _, err := c.kube.CoreV1().Nodes().Update(ctx, kn, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a removed node label removed from the Calico node", calicoNode(map[string]string{"set-by": "calicoctl", "zone": "a"}))

	if in.compactions.Load() == 0 {
		t.Error("etcd never compacted (COMPACTION_PERIOD=300ms)")
	}

	// Never touched: a policy without the knp.default. prefix.
	if _, err := get(datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: "team", Name: "mine"}); err != nil {
		t.Fatalf("a policy the controller does not own: %v", err)
	}
}

func merged(a, b map[string]string) map[string]string {
	out := maps.Clone(a)
	maps.Copy(out, b)
	return out
}

func intstrPort(p int32) intstr.IntOrString { return intstr.FromInt32(p) }

// mirrorClusterNetworkPolicy: a ClusterNetworkPolicy reaches etcd as
// kcnp.<name>, follows a change of priority and goes with its deletion.
func mirrorClusterNetworkPolicy(t *testing.T, c *cluster) {
	ctx := ctxT(t)
	cnps := cnpclient.NewForConfigOrDie(c.rc).PolicyV1alpha2().ClusterNetworkPolicies()
	cnp := &cnpv1.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "deny-team"},
		Spec: cnpv1.ClusterNetworkPolicySpec{Tier: cnpv1.AdminTier, Priority: 7,
			Subject: cnpv1.ClusterNetworkPolicySubject{Namespaces: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "team"}}},
			Ingress: []cnpv1.ClusterNetworkPolicyIngressRule{{Action: cnpv1.ClusterNetworkPolicyRuleActionDeny,
				From: []cnpv1.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}}
	// The CRD was just created: retry until the API server serves it.
	eventually(t, "ClusterNetworkPolicy created", func() (bool, error) {
		_, err := cnps.Create(ctx, cnp, metav1.CreateOptions{})
		return err == nil, nil
	})
	key := datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: "kcnp.deny-team"}
	order := func(want float64) func() (bool, error) {
		return func() (bool, error) {
			r, err := c.ds.Get(ctx, key)
			if errors.Is(err, datastore.ErrNotFound) {
				return false, nil
			}
			if err != nil {
				return false, err
			}
			p := r.(*v3.GlobalNetworkPolicy)
			return p.Spec.Tier == v3.KubeAdminTierName && p.Spec.Order != nil && *p.Spec.Order == want &&
				p.Spec.NamespaceSelector == "kubernetes.io/metadata.name == 'team'" &&
				len(p.Spec.Ingress) == 1 && p.Spec.Ingress[0].Action == v3.Deny && p.Spec.Ingress[0].Source.NamespaceSelector == "all()", nil
		}
	}
	eventually(t, "kcnp.deny-team in etcd (tier kube-admin, order 7)", order(7))
	got, err := cnps.Get(ctx, "deny-team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Spec.Priority = 9
	if _, err := cnps.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kcnp.deny-team follows the priority change", order(9))
	if err := cnps.Delete(ctx, "deny-team", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kcnp.deny-team deleted with its ClusterNetworkPolicy", func() (bool, error) {
		_, err := c.ds.Get(ctx, key)
		return errors.Is(err, datastore.ErrNotFound), nil
	})
}

// installClusterNetworkPolicyCRD installs network-policy-api's CRD (the
// cluster admin's part in etcd mode) and the built-in tiers (calico-node's).
func installClusterNetworkPolicyCRD(t *testing.T, c *cluster) {
	ctx := ctxT(t)
	for _, tier := range v3.DefaultTiers() {
		if _, err := c.ds.Create(ctx, tier); err != nil && !errors.Is(err, datastore.ErrAlreadyExists) {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	crd, err := os.ReadFile("../manifests/crds/policy.networking.k8s.io_clusternetworkpolicies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "cnp.yaml"), crd, 0o644); err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, c.rc, dir)
}
