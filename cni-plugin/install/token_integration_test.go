//go:build integration

package install

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"

	"github.com/tabbynet/tabby/internal/testservers"
)

// applyManifestRBAC applies the ServiceAccounts and RBAC of
// manifests/tabby.yaml for real.
func applyManifestRBAC(t *testing.T, k *testservers.KubeAPIServer) {
	t.Helper()
	data, err := os.ReadFile("../../manifests/tabby.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var obj struct{ Kind string }
		if yaml.Unmarshal(doc, &obj) != nil {
			continue
		}
		switch obj.Kind {
		case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			b.WriteString("---\n")
			b.Write(doc)
			b.WriteString("\n")
		}
	}
	path := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(path, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(filepath.Join(testservers.BinDir(), "kubectl"), "--kubeconfig", k.Kubeconfig(), "apply", "-f", path).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
}

// whoAmI is the user a kubeconfig authenticates as.
func whoAmI(t *testing.T, kubeconfig string) string {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := kubernetes.NewForConfigOrDie(rc).AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the CNI kubeconfig does not authenticate: %v", err)
	}
	return r.Status.UserInfo.Username
}

// failures is a log sink that reports each failed refresh.
type failures chan struct{}

func (f failures) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte("refreshing the CNI plugin's token failed")) {
		select {
		case f <- struct{}{}:
		default:
		}
	}
	return len(p), nil
}

type written struct {
	token   string
	expires time.Time
	at      time.Time
}

// TestIntegrationTokenRefreshedBeforeExpiry: the refresher, running as
// calico-node with the manifest's RBAC, writes a kubeconfig (0600) whose
// token authenticates as calico-cni-plugin, and replaces it with fresh
// short-lived tokens (10 minutes, the API server's minimum) before each
// expires. While the API server is down the last good kubeconfig stays in
// place; once it is back the refreshing resumes.
func TestIntegrationTokenRefreshedBeforeExpiry(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	applyManifestRBAC(t, k)
	adminRC, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// calico-node's own identity, as its pod would have.
	nodeToken, _, err := RequestToken(ctx, kubernetes.NewForConfigOrDie(adminRC), "kube-system", "calico-node", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	nodeClient := kubernetes.NewForConfigOrDie(&rest.Config{Host: k.URL(), BearerToken: nodeToken, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})

	// install-cni's one-shot install: binaries, kubeconfig, conflist.
	cfg, err := ConfigFromEnv(env(map[string]string{"KUBERNETES_NODE_NAME": "node-a"}))
	if err != nil {
		t.Fatal(err)
	}
	cfg.SourceDir = fakeImage(t, "calico", "calico-ipam", "calico-k8s")
	cfg.BinDir, cfg.NetDir = t.TempDir(), t.TempDir()
	cluster := Cluster{Server: k.URL(), Insecure: true}
	if err := Install(ctx, cfg, &Kube{Client: nodeClient, Cluster: cluster, Refresher: TokenRefresher{Validity: MinTokenValidity}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := whoAmI(t, cfg.KubeconfigPath()); got != "system:serviceaccount:kube-system:calico-cni-plugin" {
		t.Errorf("install-cni's kubeconfig authenticates as %q", got)
	}
	if m := mode(t, cfg.KubeconfigPath()); m != 0o600 {
		t.Errorf("install-cni's kubeconfig mode %o, want 600", m)
	}
	if m := mode(t, filepath.Join(cfg.NetDir, "10-calico.conflist")); m != 0o644 {
		t.Errorf("conflist mode %o, want 644", m)
	}

	path := filepath.Join(t.TempDir(), KubeconfigName)
	writes := make(chan written, 16)
	fails := make(failures, 1)
	r := &TokenRefresher{
		Kube:     nodeClient,
		Validity: MinTokenValidity,
		// A 10-minute token replaced after ~1.2 s.
		RefreshFraction: 0.002,
		RetryMin:        100 * time.Millisecond,
		RetryMax:        500 * time.Millisecond,
		Log:             slog.New(slog.NewTextHandler(fails, nil)),
		Write: func(token string, expires time.Time) error {
			if err := WriteKubeconfig(path, cluster, token); err != nil {
				return err
			}
			writes <- written{token, expires, time.Now()}
			return nil
		},
	}
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()

	next := func() written {
		t.Helper()
		select {
		case w := <-writes:
			return w
		case err := <-done:
			t.Fatalf("the refresher stopped: %v", err)
		case <-time.After(90 * time.Second):
			t.Fatal("no token written")
		}
		return written{}
	}
	check := func(w written) {
		t.Helper()
		if m := mode(t, path); m != 0o600 {
			t.Errorf("kubeconfig mode %o, want 600", m)
		}
		if got := whoAmI(t, path); got != "system:serviceaccount:kube-system:calico-cni-plugin" {
			t.Errorf("the kubeconfig authenticates as %q", got)
		}
		if life := time.Until(w.expires); life <= 0 || life > MinTokenValidity+time.Minute {
			t.Errorf("token lifetime left %s, want a short-lived token", life)
		}
	}

	prev := next()
	check(prev)
	for range 2 {
		w := next()
		check(w)
		if w.token == prev.token {
			t.Error("the token was rewritten, not renewed")
		}
		if !w.at.Before(prev.expires) {
			t.Errorf("refreshed at %s, after the previous token expired at %s", w.at, prev.expires)
		}
		if !w.expires.After(prev.expires) {
			t.Errorf("the new token expires %s, not after the previous %s", w.expires, prev.expires)
		}
		prev = w
	}

	// The API server goes away: refreshing fails, the kubeconfig keeps
	// the last token.
	k.Stop()
	failed := func() {
		t.Helper()
		select {
		case <-fails:
		case <-time.After(90 * time.Second):
			t.Fatal("no failed refresh reported with the API server down")
		}
	}
	failed() // from here on, nothing in flight can succeed
	for len(writes) > 0 {
		prev = <-writes
	}
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	failed()
	select {
	case w := <-writes:
		t.Fatalf("a token was written with the API server down: %v", w.at)
	default:
	}
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the kubeconfig went away while the API server was down: %v", err)
	}
	if !bytes.Equal(before, after) || !strings.Contains(string(after), prev.token) {
		t.Fatal("the kubeconfig changed while the API server was down")
	}

	k.Start()
	w := next()
	check(w)
	if w.token == prev.token {
		t.Error("no new token after the API server came back")
	}
	cancel()
	if err := <-done; err != context.Canceled {
		t.Errorf("Run returned %v, want context.Canceled", err)
	}
}
