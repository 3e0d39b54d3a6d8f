//go:build integration

package confd

import (
	"context"
	"github.com/tabbynet/tabby/internal/testlog"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestSecretFromKubernetes runs the Kubernetes-mode pipeline against a real
// kube-apiserver: Secret + Node + BGPPeer -> kdd syncer -> Daemon (reading
// the Secret through the kdd client's clientset) -> rendered config with
// the password quoted. A BGPPeer naming a missing key is reported and the
// config stays; adding the key to the Secret (no datastore event) is taken
// up by the resync.
func TestSecretFromKubernetes(t *testing.T) {
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
	t.Cleanup(func() { c.Close() })
	kube, err := clientset.For(c)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	const ns = "calico-system"
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "bgp-secrets", Namespace: ns},
		StringData: map[string]string{"tor": "md5-pass"}}
	if _, err := kube.CoreV1().Secrets(ns).Create(ctx, secret, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1",
		Annotations: map[string]string{"projectcalico.org/IPv4Address": "10.0.0.1/24"}}}
	if _, err := kube.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	peer := peerRes("tor", "10.0.0.254", 65000)
	peer.Spec.Password = pw("bgp-secrets", "tor")
	created, err := c.Create(ctx, peer)
	if err != nil {
		t.Fatal(err)
	}

	var logs testlog.Buffer
	fa := &fakeApplier{applied: make(chan string, 100)}
	d := NewDaemon(Config{NodeName: "node1", SecretResync: 200 * time.Millisecond,
		Secrets: KubeSecrets{Client: kube, Namespace: ns}, Logger: slog.New(slog.NewTextHandler(&logs, nil))}, fa)
	runCtx, stop := context.WithCancel(context.Background())
	syncer := kdd.NewSyncer(c, Kinds, d)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); d.Run(runCtx) }()
	go func() { defer wg.Done(); syncer.Run(runCtx) }()
	t.Cleanup(func() { stop(); wg.Wait() })

	start := time.Now()
	if got := wait(t, fa); !strings.Contains(got, `password "md5-pass";`) {
		t.Fatalf("password not in the rendered config:\n%s", got)
	}
	t.Logf("resources -> config with password: %v", time.Since(start))

	// A wrong key: reported, the running config stays.
	wrong := created.(*v3.BGPPeer).DeepCopy()
	wrong.Spec.Password = pw("bgp-secrets", "wrong")
	if _, err := c.Update(ctx, wrong); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logs.String(), "secret bgp-secrets has no key wrong") {
		if time.Now().After(deadline) {
			t.Fatalf("wrong key not reported:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	none(t, fa, 500*time.Millisecond) // two resyncs, no new config
	if n := strings.Count(logs.String(), "cannot render BIRD config"); n != 1 {
		t.Errorf("reported %d times, want once:\n%s", n, logs.String())
	}

	// Adding the key to the Secret is picked up without any Calico change.
	secret.StringData = map[string]string{"tor": "md5-pass", "wrong": "now-right"}
	if _, err := kube.CoreV1().Secrets(ns).Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, fa); !strings.Contains(got, `password "now-right";`) {
		t.Fatalf("fixed Secret not taken up:\n%s", got)
	}
	if out := logs.String(); strings.Contains(out, "md5-pass") || strings.Contains(out, "now-right") {
		t.Errorf("a password reached the log:\n%s", out)
	}
}
