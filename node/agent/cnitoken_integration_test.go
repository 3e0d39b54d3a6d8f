//go:build integration

package agent

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	authv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/internal/testservers"
)

// TestIntegrationCNITokenRefresher: with KUBECONFIG (outside a pod) and
// the CNI config folder present, calico-node's refresher writes the CNI
// plugin's kubeconfig (mode 0600) with a TokenRequest token of
// kube-system/calico-cni-plugin; CALICO_MANAGE_CNI=false or no folder
// turns it off.
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
	r, why, err := cniTokenRefresher(getenv, nil)
	if err != nil || r == nil {
		t.Fatalf("refresher: %v, %v (%s)", r, err, why)
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
	if r, _, _ := cniTokenRefresher(getenv, nil); r != nil {
		t.Error("refresher with CALICO_MANAGE_CNI=false")
	}
	delete(env, "CALICO_MANAGE_CNI")
	env["TABBY_CNI_KUBECONFIG"] = filepath.Join(dir, "missing", "calico-kubeconfig")
	if r, _, _ := cniTokenRefresher(getenv, nil); r != nil {
		t.Error("refresher without the CNI folder")
	}
}
