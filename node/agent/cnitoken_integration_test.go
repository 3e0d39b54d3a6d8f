//go:build integration

package agent

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/cni-plugin/install"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/node/health"
)

// TestIntegrationCNITokenRefresher: with KUBECONFIG (outside a pod) and
// the CNI config folder present, calico-node's refresher writes the CNI
// plugin's kubeconfig (mode 0600) with a TokenRequest token of
// kube-system/calico-cni-plugin; CALICO_MANAGE_CNI=false or no folder
// turns it off. Once the agent is ready, the Node's NetworkUnavailable
// condition is set False (CalicoIsUp), other conditions untouched.
func TestIntegrationCNITokenRefresher(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(rc)
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "calico-cni-plugin"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "calico-kubeconfig")
	env := map[string]string{"KUBECONFIG": k.Kubeconfig(), "TABBY_CNI_KUBECONFIG": path}
	getenv := func(k string) string { return env[k] }
	ik, err := install.KubeFromEnv(getenv, install.DefaultTokenValidity, nil)
	if err != nil || ik == nil {
		t.Fatalf("KubeFromEnv: %v, %v", ik, err)
	}
	r, why := cniTokenRefresher(getenv, ik, nil)
	if r == nil {
		t.Fatalf("no refresher: %s", why)
	}
	if _, err := r.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("kubeconfig %v, %v; want mode 600", st, err)
	}
	cfg, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	token := cfg.AuthInfos[cfg.Contexts[cfg.CurrentContext].AuthInfo].Token
	rev, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authv1.TokenReview{Spec: authv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil || !rev.Status.Authenticated || rev.Status.User.Username != "system:serviceaccount:kube-system:calico-cni-plugin" {
		t.Errorf("the written token: %+v, %v", rev.Status, err)
	}
	env["CALICO_MANAGE_CNI"] = "false"
	if r, _ := cniTokenRefresher(getenv, ik, nil); r != nil {
		t.Error("refresher with CALICO_MANAGE_CNI=false")
	}
	delete(env, "CALICO_MANAGE_CNI")
	env["TABBY_CNI_KUBECONFIG"] = filepath.Join(dir, "missing", "calico-kubeconfig")
	if r, _ := cniTokenRefresher(getenv, ik, nil); r != nil {
		t.Error("refresher without the CNI folder")
	}
	if r, _ := cniTokenRefresher(func(string) string { return "" }, nil, nil); r != nil {
		t.Error("refresher outside Kubernetes")
	}

	// The NetworkUnavailable condition (a cloud's route controller sets
	// it True) is cleared once the agent is ready.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "kn1"}}
	if node, err = kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionTrue, Reason: "NoRouteCreated"},
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady"}}
	if _, err := kube.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	agg := health.NewAggregator(nil)
	agg.Register("felix/dataplane", 0).SetReady(true, "")
	if err := manageNodeCondition(ctx, agg, kube, "kn1", slog.Default()); err != nil {
		t.Fatal(err)
	}
	got, err := kube.CoreV1().Nodes().Get(ctx, "kn1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds := map[corev1.NodeConditionType]corev1.NodeCondition{}
	for _, c := range got.Status.Conditions {
		conds[c.Type] = c
	}
	if c := conds[corev1.NodeNetworkUnavailable]; c.Status != corev1.ConditionFalse || c.Reason != "CalicoIsUp" {
		t.Errorf("NetworkUnavailable condition %+v", c)
	}
	if c := conds[corev1.NodeReady]; c.Status != corev1.ConditionTrue {
		t.Errorf("the patch touched another condition: Ready %+v", c)
	}
}
