//go:build privileged

package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
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

// agnPod is an agnhost netexec pod (HTTP on 8080) that the scheduler
// places on node.
func agnPod(ns, name, node string, labels map[string]string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "agnhost", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"},
			}},
		},
	}
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

// waitRunning waits for the pod to run with an IP.
func waitRunning(ctx context.Context, kc kubernetes.Interface, ns, name string, timeout time.Duration) (*corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("phase %s, ip %q, %v", p.Status.Phase, p.Status.PodIP, p.Status.ContainerStatuses)
			}
			return nil, fmt.Errorf("pod %s/%s not running after %s: %w", ns, name, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostnameFrom asks server's netexec for its hostname from inside
// client's network namespace; "" and the error when it cannot.
func (c *Cluster) hostnameFrom(ctx context.Context, client, server *corev1.Pod, timeout time.Duration) (string, error) {
	netns, err := c.PodNetns(client)
	if err != nil {
		return "", err
	}
	defer netns.Close()
	conn, err := Dial(ctx, netns, net.JoinHostPort(server.Status.PodIP, "8080"), timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return httpGet(conn, "/hostname", timeout)
}

// httpGet sends one GET on conn (kept open) and returns the body.
func httpGet(conn net.Conn, path string, timeout time.Duration) (string, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return strings.TrimSpace(string(b)), err
}
