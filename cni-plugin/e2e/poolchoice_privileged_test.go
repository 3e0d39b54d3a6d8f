//go:build privileged && integration

package e2e

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedPoolChoiceKubernetesDatastore: with datastore_type
// kubernetes, a namespace's pool annotations and the pools'
// namespaceSelectors decide a pod's pool as in Calico (poolChoice).
func TestPrivilegedPoolChoiceKubernetesDatastore(t *testing.T) {
	node := netnstest.NewNode(t)
	t.Setenv("TABBY_CNI_HINT_DIR", t.TempDir())
	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags("--shutdown-watch-termination-grace-period=1s"))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	client, err := kdd.New(kdd.Config{REST: rc})
	if err != nil {
		t.Fatal(err)
	}
	conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{map[string]any{
		"type": "calico", "datastore_type": "kubernetes", "kubernetes": map[string]any{"kubeconfig": nodeKubeconfig(t, node, k)},
		"nodename": "node1", "ipam": map[string]any{"type": "calico-ipam"}, "policy": map[string]any{"type": "k8s"},
	}}})
	list, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{t: t, node: node, client: client, cni: libcni.NewCNIConfigWithCacheDir([]string{cniBinDir(t)}, t.TempDir(), nil), list: list}
	poolChoice(t, c, kubernetes.NewForConfigOrDie(rc))
}

// TestPrivilegedPoolChoiceEtcdDatastore: the same on etcd, with the
// kubeconfig and policy type k8s of Calico's etcd manifests (the pod and
// its namespace are read from Kubernetes). Before that, without any
// Kubernetes access, a namespaceSelector is matched against no labels,
// as Calico's IPAM matches a namespace it does not know.
func TestPrivilegedPoolChoiceEtcdDatastore(t *testing.T) {
	c := newCluster(t, clusterOpts{})
	ctx := context.Background()
	c.createPoolSelecting("only-w", "10.73.0.0/16", "ns == 'w'")
	p := c.newPodIn("w", "early")
	if code, msg := cniCode(c.add(p)); code != 101 || !strings.Contains(msg, `namespaceSelector "ns == 'w'"`) || !strings.Contains(msg, "labels are unknown") {
		t.Fatalf("ADD without Kubernetes access, the only pool selecting ns == 'w': code %d %q, want 101 saying the labels are unknown", code, msg)
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Fatalf("left after the refused ADD: %v", left)
	}
	if _, err := c.client.Delete(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "only-w"}, datastore.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags("--shutdown-watch-termination-grace-period=1s"))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	var conf map[string]any
	if err := json.Unmarshal(c.list.Plugins[0].Bytes, &conf); err != nil {
		t.Fatal(err)
	}
	conf["policy"] = map[string]any{"type": "k8s"}
	conf["kubernetes"] = map[string]any{"kubeconfig": nodeKubeconfig(t, c.node, k)}
	conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{conf}})
	if c.list, err = libcni.ConfListFromBytes(conflist); err != nil {
		t.Fatal(err)
	}
	poolChoice(t, c, kubernetes.NewForConfigOrDie(rc))
}

// poolChoice checks Calico's pool choice against real pods and
// namespaces: pools named by the pod's annotation, else by its
// namespace's, are used whatever their selectors (as Calico's
// determinePools); otherwise the pools whose namespaceSelector selects the
// namespace's labels. When no pool selects the namespace the ADD fails
// with code 101 naming each pool and why, never falling back to a pool
// the selectors exclude.
func poolChoice(t *testing.T, c *cluster, kube kubernetes.Interface) {
	ctx := context.Background()
	c.createPoolSelecting("default-pool", "10.70.0.0/16", "ns != 'w'")
	c.createPoolSelecting("pool-w", "10.71.0.0/16", "ns == 'w'")
	c.createPoolSelecting("pool3", "10.72.0.0/16", "ns == 'nobody'")
	for _, n := range []*corev1.Namespace{
		{ObjectMeta: metav1.ObjectMeta{Name: "v", Annotations: map[string]string{"cni.projectcalico.org/ipv4pools": `["pool3"]`}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "w", Labels: map[string]string{"ns": "w"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "u"}},
	} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	type want struct {
		namespace, name, prefix, why string
		ann                          map[string]string
	}
	cases := []want{
		{"v", "a", "10.72.", "its namespace's ipv4pools annotation, whatever pool3's namespaceSelector", nil},
		{"v", "b", "10.70.", "its own ipv4pools annotation, which wins over its namespace's", map[string]string{"cni.projectcalico.org/ipv4pools": `["default-pool"]`}},
		{"w", "c", "10.71.", "pool-w, the one pool whose namespaceSelector selects w", nil},
		{"u", "d", "10.70.", "default-pool: pool-w's namespaceSelector excludes u", nil},
		{"w", "e", "", "", nil},
	}
	for _, p := range cases {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.namespace, Annotations: p.ann},
			Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := kube.CoreV1().Pods(p.namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var added []*pod
	for _, p := range cases[:4] {
		pp := c.newPodIn(p.namespace, p.name)
		c.mustAdd(pp)
		added = append(added, pp)
		if got := pp.ip(false); !strings.HasPrefix(got, p.prefix) {
			t.Errorf("pod %s/%s got %s, want an address of %s", p.namespace, p.name, got, p.why)
		}
	}
	// pool-w disabled: no pool is left for w (default-pool excludes it).
	// The ADD fails naming both pools and why, and changes nothing.
	r, err := c.client.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: "pool-w"})
	if err != nil {
		t.Fatal(err)
	}
	r.(*v3.IPPool).Spec.Disabled = true
	if _, err := c.client.Update(ctx, r); err != nil {
		t.Fatal(err)
	}
	e := c.newPodIn("w", "e")
	code, msg := cniCode(c.add(e))
	if code != 101 {
		t.Fatalf("ADD of w/e with no pool selecting w: code %d %q, want 101", code, msg)
	}
	for _, s := range []string{`no configured Calico pools for this node and namespace "w"`,
		`default-pool (10.70.0.0/16) has namespaceSelector "ns != 'w'", which does not select namespace "w"`,
		"pool-w (10.71.0.0/16) is disabled"} {
		if !strings.Contains(msg, s) {
			t.Errorf("ADD of w/e: %q does not say %q", msg, s)
		}
	}
	if v := c.hostVeths(t); len(v) != len(added) {
		t.Errorf("host veths after the refused ADD: %v, want %d", v, len(added))
	}
	for _, p := range added {
		if err := c.del(p); err != nil {
			t.Fatal(err)
		}
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Errorf("left after DEL: %v", left)
	}
}

// nodeKubeconfig writes a kubeconfig for plugins run in the node
// namespace: it reaches the API server through a proxy listening there.
func nodeKubeconfig(t testing.TB, node ns.NetNS, k *testservers.KubeAPIServer) string {
	t.Helper()
	proxied := proxyInto(t, node, strings.TrimPrefix(k.URL(), "https://"))
	kc, err := os.ReadFile(k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "calico-kubeconfig")
	if err := os.WriteFile(path, []byte(strings.Replace(string(kc), k.URL(), "https://"+proxied, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
