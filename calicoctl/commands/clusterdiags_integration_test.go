//go:build integration

package commands

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// testClusterDiags: cluster diags against the real kube-apiserver writes
// ./calico-diagnostics-<time>.tar.gz with the Kubernetes version, every
// Calico kind (YAML and wide table) and the core Kubernetes objects, and
// tries the Calico pods' logs (no kubelet runs here: each failure is
// reported and collection goes on). With etcd and no Kubernetes API it
// refuses.
func testClusterDiags(t *testing.T, b cliBackend) {
	work := t.TempDir()
	env := map[string]string{}
	for k, v := range b.env {
		env[k] = v
	}
	if b.kind() == "etcd" {
		env["KUBECONFIG"] = "/nonexistent/kubeconfig"
	}
	var out bytes.Buffer
	a := &app{stdout: &out, stderr: &out, getenv: func(k string) string { return env[k] }, newClient: b.backends.New,
		defaultConfig: "/nonexistent/calicoctl.cfg", workDir: work,
		clock: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }}
	if b.kind() == "kubernetes" {
		w := newWorld(t, b)
		no := false
		_, err := w.kube.CoreV1().Pods("default").Create(w.ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "calico-node-diag"},
			Spec: corev1.PodSpec{NodeName: "live-node", AutomountServiceAccountToken: &no, Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}}},
			metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.kube.CoreV1().Pods("default").Delete(w.ctx, "calico-node-diag", metav1.DeleteOptions{})
	}
	code := run(a, []string{"cluster", "diags", "--since=1h", "--max-logs=1"})
	got := out.String()
	if m := regexp.MustCompile(`Created temporary directory: (\S+)`).FindStringSubmatch(got); m != nil {
		got = strings.ReplaceAll(got, m[1], "<tmp>")
	}
	got = regexp.MustCompile(`(ERROR collecting logs for pod calico-node-diag): .*`).ReplaceAllString(got, "$1: <error>")
	got = regexp.MustCompile(`(no such file or directory|connection refused).*`).ReplaceAllString(got, "$1")
	checkGolden(t, "cluster-diags-"+b.kind(), fmt.Sprintf("$ calicoctl cluster diags --since=1h --max-logs=1\nexit %d\n%s", code, got))
	if b.kind() != "kubernetes" {
		if code == 0 {
			t.Fatal("cluster diags without a Kubernetes API succeeded")
		}
		return
	}
	names, files := readTarGz(t, filepath.Join(work, "calico-diagnostics-20260102_030405.tar.gz"))
	for _, want := range []string{
		"calico-diagnostics-20260102_030405/cluster/version.yaml",
		"calico-diagnostics-20260102_030405/cluster/crd/ippools.crd.projectcalico.org.yaml",
		"calico-diagnostics-20260102_030405/cluster/crd/ippools.crd.projectcalico.org.txt",
		"calico-diagnostics-20260102_030405/cluster/crd/networkpolicies.crd.projectcalico.org.txt",
		"calico-diagnostics-20260102_030405/cluster/kubernetes/nodes.yaml",
		"calico-diagnostics-20260102_030405/cluster/kubernetes/pods.yaml",
		"calico-diagnostics-20260102_030405/nodes/live-node/default/calico-node-diag.yaml",
	} {
		if !slices.Contains(names, want) {
			t.Errorf("bundle lacks %s", want)
		}
	}
	if !strings.Contains(files["calico-diagnostics-20260102_030405/cluster/crd/ippools.crd.projectcalico.org.txt"], "ASSIGNMENTMODE") {
		t.Errorf("ippools table: %q", files["calico-diagnostics-20260102_030405/cluster/crd/ippools.crd.projectcalico.org.txt"])
	}
	if !strings.Contains(files["calico-diagnostics-20260102_030405/cluster/version.yaml"], "gitVersion: v1.") {
		t.Errorf("version.yaml: %q", files["calico-diagnostics-20260102_030405/cluster/version.yaml"])
	}
}
