//go:build privileged && integration

package confd_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/bird/birdtest"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedMD5FromSecret: two real BIRDs, each driven by a confd in
// Kubernetes mode, mesh with the nodeMeshPassword read from a Secret in a
// real kube-apiserver. MD5 is proven to be in force, not just written: when
// the Secret is rotated while node2's confd is stopped, node1 alone takes
// the new password and the session stays down (the kernel counts MD5
// failures); once node2's confd runs again it takes the new password too
// and the session comes back.
func TestPrivilegedMD5FromSecret(t *testing.T) {
	nodes := []*testNode{{name: "node1", ip: "10.99.0.1"}, {name: "node2", ip: "10.99.0.2"}}
	// Namespaces (and BIRDs, without password) before the API server's
	// etcd: see the Pdeathsig note in datastore_privileged_test.go.
	cluster(t, nodes, resources(nodes, true, ""))

	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../manifests/crds")
	c, err := kdd.New(kdd.Config{REST: rc, RequestTimeout: 5 * time.Second, QPS: -1})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := clientset.For(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ns = "calico-system"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bgp-secrets", Namespace: ns},
		StringData: map[string]string{"mesh": "first-pass"}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		kn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.name,
			Annotations: map[string]string{"projectcalico.org/IPv4Address": n.ip + "/24"}}}
		if _, err := kube.CoreV1().Nodes().Create(ctx, kn, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := v3.DecodeYAML([]byte(`apiVersion: projectcalico.org/v3
kind: BGPConfiguration
metadata: {name: default}
spec:
  nodeToNodeMeshEnabled: true
  nodeMeshPassword: {secretKeyRef: {name: bgp-secrets, key: mesh}}
`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create(ctx, cfg[0]); err != nil {
		t.Fatal(err)
	}

	// runConfd runs one node's confd until the returned stop is called.
	logs := t.TempDir()
	runConfd := func(n *testNode) (stop func()) {
		drv, err := bird.NewDriver(n.bird.ConfigPath, n.bird.Ctl)
		if err != nil {
			t.Fatal(err)
		}
		d := confd.NewDaemon(confd.Config{NodeName: n.name, LogFile: filepath.Join(logs, n.name+".log"),
			Secrets: confd.KubeSecrets{Client: kube, Namespace: ns}, SecretResync: 200 * time.Millisecond,
			Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}, drv)
		rctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); d.RunSyncer(rctx, kdd.NewSyncer(c, confd.Kinds, d)) }()
		var once sync.Once
		stop = func() { once.Do(func() { cancel(); wg.Wait() }) }
		t.Cleanup(stop)
		return stop
	}
	waitConfig := func(n *testNode, want string) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			b, _ := os.ReadFile(n.bird.ConfigPath)
			if strings.Contains(string(b), want) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: config never got %q:\n%s", n.name, want, b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	runConfd(nodes[0])
	stop2 := runConfd(nodes[1])
	for _, n := range nodes {
		waitConfig(n, `password "first-pass";`)
	}
	nodes[0].bird.WaitEstablished(t, 20*time.Second, "Mesh_10_99_0_2")
	nodes[1].bird.WaitEstablished(t, 5*time.Second, "Mesh_10_99_0_1")
	md5Before := md5Failures(t, nodes[0])

	// Rotate the Secret while node2's confd is down: passwords differ.
	stop2()
	secret.StringData = map[string]string{"mesh": "second-pass"}
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitConfig(nodes[0], `password "second-pass";`)
	// The file is written before BIRD is reconfigured: the old session
	// may still be up for a moment. It must go down (the new password
	// restarts it) ...
	established := func() bool {
		ps, err := nodes[0].bird.Protocols()
		return err == nil && strings.HasPrefix(ps["Mesh_10_99_0_2"].Info, "Established")
	}
	down := time.Now().Add(10 * time.Second)
	for established() {
		if time.Now().After(down) {
			t.Fatal("session still Established 10s after node1's password changed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// ... and not come back while the passwords differ, for longer than
	// the connect retry time (5s): node2 keeps trying.
	deadline := time.Now().Add(7 * time.Second)
	for time.Now().Before(deadline) {
		ps, err := nodes[0].bird.Protocols()
		if err == nil && strings.HasPrefix(ps["Mesh_10_99_0_2"].Info, "Established") {
			t.Fatalf("session Established with different MD5 passwords: %+v", ps["Mesh_10_99_0_2"])
		}
		time.Sleep(100 * time.Millisecond)
	}
	md5After := md5Failures(t, nodes[0])
	if md5After <= md5Before {
		t.Errorf("kernel counted no MD5 failures on node1 (%d -> %d)", md5Before, md5After)
	}
	t.Logf("MD5 failures counted by node1's kernel while the passwords differed: %d", md5After-md5Before)

	// node2's confd back: it reads the rotated Secret, the session returns.
	runConfd(nodes[1])
	waitConfig(nodes[1], `password "second-pass";`)
	nodes[0].bird.WaitEstablished(t, 20*time.Second, "Mesh_10_99_0_2")
	nodes[1].bird.WaitEstablished(t, 5*time.Second, "Mesh_10_99_0_1")
	for _, n := range nodes {
		b, _ := os.ReadFile(filepath.Join(logs, n.name+".log"))
		if strings.Contains(string(b), "-pass") {
			t.Errorf("%s: a password reached BIRD's log", n.name)
		}
	}
}

// md5Failures reads the kernel's count of segments dropped for a wrong or
// missing TCP MD5 signature in n's namespace.
func md5Failures(t *testing.T, n *testNode) int {
	t.Helper()
	out := birdtest.MustInNS(t, n.ns, "cat", "/proc/net/netstat")
	total := 0
	lines := strings.Split(out, "\n")
	for i := 0; i+1 < len(lines); i += 2 {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		for j, name := range names {
			if (name == "TCPMD5Failure" || name == "TCPMD5NotFound" || name == "TCPMD5Unexpected") && j < len(values) {
				v, err := strconv.Atoi(values[j])
				if err != nil {
					t.Fatalf("/proc/net/netstat %s=%q", name, values[j])
				}
				total += v
			}
		}
	}
	return total
}
