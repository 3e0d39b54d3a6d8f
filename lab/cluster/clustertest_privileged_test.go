//go:build privileged

package cluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// repoRoot is the repository's root (this file is lab/cluster/...).
func repoRoot() string {
	_, f, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(f), "..", "..")
}

// testCluster brings a cluster up for the test (the binaries built into
// a temporary folder, the Kubernetes ones and the image from their
// caches) and removes it when the test ends, whatever happened.
func testCluster(t testing.TB, o Options) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root: the cluster runs in network and mount namespaces")
	}
	root := repoRoot()
	o.Bin = t.TempDir()
	build := exec.Command("go", "build", "-o", o.Bin+"/", "./lab/cmd/tabby-lab", "./lab/cluster/cmd/tabby-pause", "./calicoctl",
		"github.com/containernetworking/plugins/plugins/main/loopback")
	build.Dir = root
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("building: %v\n%s", err, out)
	}
	home, _ := os.UserHomeDir()
	o.KubeBin = envOr("TABBY_KUBE_BIN", filepath.Join(home, ".cache", "tabby-kube", "bin"))
	o.ImageTar = envOr("TABBY_IMAGE_TAR", filepath.Join(root, "bin", "tabby-image.tar"))
	if o.Manifest == "" {
		o.Manifest = filepath.Join(root, "manifests", "tabby.yaml")
	}
	o.Dir = filepath.Join("/run", fmt.Sprintf("tabby-cluster-test-%s", randHex(6)))
	o.Out = testWriter{t}
	var prefix string
	t.Cleanup(func() {
		if err := Down(o.Dir); err != nil {
			t.Errorf("down: %v", err)
		}
		if left := Leftovers(prefix); prefix != "" && len(left) > 0 {
			t.Errorf("down left %v", left)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	c, err := Up(ctx, o)
	if c != nil {
		prefix = c.State.Prefix
	}
	if err != nil {
		if c != nil {
			for _, n := range []string{"kube-apiserver", "kubelet-node-1", "containerd-node-1"} {
				t.Logf("%s:\n%s", n, c.logTail(n))
			}
			lctx, lcancel := context.WithTimeout(context.Background(), 20*time.Second)
			for _, prev := range []string{"--previous=true", "--previous=false"} {
				out, err := c.Kubectl(lctx, "-n", "kube-system", "logs", "-l", "k8s-app=calico-node", "-c", "calico-node", "--tail=30", prev)
				t.Logf("calico-node logs (%s): %v\n%s", prev, err, out)
			}
			lcancel()
		}
		t.Fatalf("up: %v", err)
	}
	return c
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// createPods creates the pods and waits until each runs with an address.
func createPods(t testing.TB, ctx context.Context, kc kubernetes.Interface, pods ...*corev1.Pod) []*corev1.Pod {
	t.Helper()
	for _, p := range pods {
		if _, err := kc.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	out := make([]*corev1.Pod, len(pods))
	for i, p := range pods {
		got, err := waitRunning(ctx, kc, p.Namespace, p.Name, 2*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		out[i] = got
	}
	return out
}
