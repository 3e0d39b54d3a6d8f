//go:build privileged

package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestPrivilegedClusterTypha: tabby.yaml with Typha turned on as README
// says (2 replicas, typha_service_name calico-typha): every calico-node's
// felix and confd follow the datastore through Typha, found through the
// calico-typha Service; a NetworkPolicy is enforced; one Typha pod is
// force-deleted, its clients resync through the other, and a
// NetworkPolicy is still enforced afterwards.
func TestPrivilegedClusterTypha(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "manifests", "tabby.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), `typha_service_name: "none"`, `typha_service_name: "calico-typha"`, 1)
	s = strings.Replace(s, "  replicas: 0\n", "  replicas: 2\n", 1)
	manifest := filepath.Join(t.TempDir(), "tabby-typha.yaml")
	if err := os.WriteFile(manifest, []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
	c := testCluster(t, Options{Manifest: manifest})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	eventuallyC(t, 2*time.Minute, "2 Typhas available", func() bool {
		d, err := kc.AppsV1().Deployments("kube-system").Get(ctx, "calico-typha", metav1.GetOptions{})
		return err == nil && d.Status.AvailableReplicas == 2
	})
	var typhaLines []string // calico-node's lines about Typha, for failures
	connected := func() (felix, confd int) {
		out, err := c.Kubectl(ctx, "-n", "kube-system", "logs", "-l", "k8s-app=calico-node", "-c", "calico-node", "--tail=-1")
		if err != nil {
			t.Fatalf("calico-node logs: %v", err)
		}
		typhaLines = typhaLines[:0]
		for _, l := range strings.Split(out, "\n") {
			if strings.Contains(l, "Typha") {
				typhaLines = append(typhaLines, l)
			}
			if strings.Contains(l, "connected to Typha") {
				if strings.Contains(l, `syncer="felix"`) {
					felix++
				} else if strings.Contains(l, `syncer="bgp"`) {
					confd++
				}
			}
		}
		return felix, confd
	}
	eventuallyC(t, time.Minute, "every felix and confd connected to Typha", func() bool {
		f, cd := connected()
		return f >= len(c.State.Nodes) && cd >= len(c.State.Nodes)
	}, func() string { return strings.Join(typhaLines, "\n") })
	if _, err := c.Kubectl(ctx, "create", "namespace", "t"); err != nil {
		t.Fatal(err)
	}
	pods := createPods(t, ctx, kc,
		agnPod("t", "a1", "node-1", map[string]string{"app": "a"}),
		agnPod("t", "a2", "node-2", map[string]string{"app": "a"}),
		agnPod("t", "a3", "node-3", map[string]string{"app": "b"}))
	c.waitReach(t, ctx, pods[0], pods[2], true)
	c.checkNetworkPolicy(t, ctx, pods)

	f0, c0 := connected()
	typhas, err := kc.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=calico-typha"})
	if err != nil || len(typhas.Items) != 2 {
		t.Fatalf("Typha pods: %v (%d)", err, len(typhas.Items))
	}
	// The victim is a Typha that clients are on (replicas that became
	// ready later may have none).
	victim := ""
	for _, p := range typhas.Items {
		for _, l := range typhaLines {
			if victim == "" && p.Status.PodIP != "" && strings.Contains(l, "connected to Typha") && strings.Contains(l, p.Status.PodIP+":") {
				victim = p.Name
			}
		}
	}
	if victim == "" {
		t.Fatalf("no Typha pod's address in calico-node's lines:\n%s", strings.Join(typhaLines, "\n"))
	}
	start := time.Now()
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "delete", "pod", victim, "--grace-period=0", "--force"); err != nil {
		t.Fatal(err)
	}
	eventuallyC(t, time.Minute, "the killed Typha's clients connected again", func() bool {
		f, cd := connected()
		return f+cd > f0+c0
	})
	f1, c1 := connected()
	t.Logf("Typha %s deleted: %d felix and %d confd clients reconnected within %s", victim, f1-f0, c1-c0, time.Since(start).Round(time.Second))
	c.waitReach(t, ctx, pods[0], pods[2], true)
	c.checkNetworkPolicy(t, ctx, pods)
}

func eventuallyC(t *testing.T, timeout time.Duration, what string, cond func() bool, explain ...func() string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			var why string
			for _, e := range explain {
				why += e()
			}
			t.Fatalf("timed out after %s: %s\n%s", timeout, what, why)
		}
		time.Sleep(time.Second)
	}
}
