//go:build integration

package kuberelay_test

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/node/kuberelay"
)

// TestRelay against a real kube-apiserver: what the relay answers from its
// watches (reads at resourceVersion 0 of what it watches: a list of the
// pools, the node's affinities by their label, a missing IPAMConfig as
// NotFound, a pod of this node, the node's affine block) and what it does
// not hold (a pod or block of another node, consistent reads, lists of
// kinds watched by field), which the client then asks the API server with
// its own credentials; the relay answers nothing else (a write sent to it
// is 421 and changes nothing); a change reaches the cache; the socket is
// root-only and removed at the end; a stale socket is not asked twice.
func TestRelay(t *testing.T) {
	ctx := context.Background()
	k := testservers.StartKubeAPIServer(t)
	admin, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, admin, "../../manifests/crds")
	kube := kubernetes.NewForConfigOrDie(admin)
	direct, err := kdd.New(kdd.Config{REST: admin})
	if err != nil {
		t.Fatal(err)
	}
	mustCreate(t, direct, &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: "p1"}, Spec: v3.IPPoolSpec{CIDR: "10.9.0.0/16"}})
	blocks := map[string]netip.Prefix{"node1": netip.MustParsePrefix("10.9.0.0/26"), "node2": netip.MustParsePrefix("10.9.0.64/26")}
	for _, n := range []string{"node1", "node2"} {
		mustCreate(t, direct, &v3.BlockAffinity{TypeMeta: metav1.TypeMeta{Kind: v3.KindBlockAffinity}, ObjectMeta: metav1.ObjectMeta{Name: ipam.AffinityName(n, blocks[n])},
			Spec: v3.BlockAffinitySpec{Node: n, CIDR: blocks[n].String(), State: v3.BlockAffinityStateConfirmed}})
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-" + n, Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: n, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	socket := filepath.Join(t.TempDir(), "relay", "kube-relay.sock")
	r, err := kuberelay.New(kuberelay.Config{REST: admin, Node: "node1", Socket: socket, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	rctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- r.Run(rctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		if _, err := os.Stat(socket); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("socket left after Run: %v", err)
		}
	}()
	waitFor(t, "the relay's caches to sync", r.Synced)
	if st, err := os.Stat(socket); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("socket %v %v: want mode 0600", st, err)
	}

	// The plugin's client, with a token of its own that may read but not
	// write pods.
	plugin := rest.CopyConfig(admin)
	plugin.BearerToken = tokenFor(t, kube, "cni-reader", []string{"get"})
	relayed := kdd.ViaRelay(plugin, socket)
	c, err := kdd.New(kdd.Config{REST: plugin, Relay: socket})
	if err != nil {
		t.Fatal(err)
	}
	counts := func() [2]int64 { a, f := r.Counts(); return [2]int64{a, f} }

	before := counts()
	pools, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{Cached: true})
	if err != nil || len(pools.Items) != 1 || pools.Items[0].GetName() != "p1" {
		t.Fatalf("cached pool list: %v %v", pools, err)
	}
	affs, err := c.List(ctx, v3.KindBlockAffinity, datastore.ListOptions{Node: "node1", Cached: true})
	if err != nil || len(affs.Items) != 1 || affs.Items[0].(*v3.BlockAffinity).Spec.Node != "node1" {
		t.Fatalf("cached affinities of node1: %v %v", affs, err)
	}
	if _, err := c.GetCached(ctx, datastore.Key{Kind: v3.KindIPAMConfiguration, Name: "default"}); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("cached IPAMConfiguration default: %v, want not found", err)
	}
	if got := counts(); got[0]-before[0] != 3 || got[1] != before[1] {
		t.Fatalf("counts %v -> %v: want 3 answered from the caches, none missed", before, got)
	}

	// Blocks: node1's affine block, once it exists, from its own watch;
	// node2's (not affine to node1) from the API server.
	for n, p := range blocks {
		mustCreate(t, direct, ipam.NewBlock(p, n, metav1.Now()))
	}
	blockKey := func(n string) datastore.Key {
		return datastore.Key{Kind: v3.KindIPAMBlock, Name: ipam.BlockName(blocks[n])}
	}
	waitFor(t, "node1's block in the relay's cache", func() bool {
		before := counts()
		_, err := c.GetCached(ctx, blockKey("node1"))
		return err == nil && counts()[0] == before[0]+1
	})
	// (This caller may not read blocks: the API server says so, as it
	// would without a relay.)
	before = counts()
	if _, err := c.GetCached(ctx, blockKey("node2")); err == nil || !strings.Contains(err.Error(), "forbidden") {
		t.Fatalf("node2's block with a token that may not read blocks: %v, want the API server's forbidden", err)
	}
	if got := counts(); got[1] != before[1]+1 {
		t.Fatalf("counts %v -> %v: want node2's block (not affine to node1) not held", before, got)
	}

	// Pods through the core group's REST client, as the plugin reads them.
	core := kubernetes.NewForConfigOrDie(relayed).CoreV1()
	before = counts()
	for _, n := range []string{"node1", "node2"} {
		p, err := core.Pods("default").Get(ctx, "pod-"+n, metav1.GetOptions{ResourceVersion: "0"})
		if err != nil || p.Spec.NodeName != n {
			t.Fatalf("pod of %s through the relay: %v %v", n, p, err)
		}
	}
	if _, err := core.Pods("default").Get(ctx, "pod-node1", metav1.GetOptions{}); err != nil {
		t.Fatalf("consistent read through the relay: %v", err)
	}
	// A list of pods: the cache holds this node's only, so it is the API
	// server's (this token may not list: forbidden).
	if _, err := core.Pods("default").List(ctx, metav1.ListOptions{ResourceVersion: "0"}); !apierrors.IsForbidden(err) {
		t.Fatalf("pod list with a token that may not list: %v, want the API server's forbidden", err)
	}
	if got := counts(); got[0]-before[0] != 1 || got[1]-before[1] != 2 {
		t.Fatalf("counts %v -> %v: want node1's pod from the cache; node2's and the list not held (the consistent read not asked)", before, got)
	}

	// The relay answers nothing but reads: a write sent to it is 421 and
	// changes nothing.
	raw := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", socket)
	}}}
	req, _ := http.NewRequest(http.MethodPatch, "http://kube-relay/api/v1/namespaces/default/pods/pod-node1",
		strings.NewReader(`{"metadata":{"annotations":{"a":"b"}}}`))
	req.Header.Set("Content-Type", "application/merge-patch+json")
	resp, err := raw.Do(req)
	if err != nil || resp.StatusCode != kdd.RelayMissStatus {
		t.Fatalf("PATCH sent to the relay: %v %v, want %d", resp, err, kdd.RelayMissStatus)
	}
	resp.Body.Close()
	if p, err := kube.CoreV1().Pods("default").Get(ctx, "pod-node1", metav1.GetOptions{}); err != nil || p.Annotations["a"] != "" {
		t.Fatalf("pod after a PATCH sent to the relay: %v %v", p.Annotations, err)
	}

	// A change reaches the cache.
	mustCreate(t, direct, &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: "p2"}, Spec: v3.IPPoolSpec{CIDR: "10.10.0.0/16"}})
	waitFor(t, "the new pool in the relay's cache", func() bool {
		l, err := c.List(ctx, v3.KindIPPool, datastore.ListOptions{Cached: true})
		return err == nil && len(l.Items) == 2
	})

	// A stale socket (calico-node killed): the first read fails over to
	// the API server, later ones are not asked of it.
	stale := filepath.Join(t.TempDir(), "stale.sock")
	l, err := net.Listen("unix", stale)
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()
	sc, err := kdd.New(kdd.Config{REST: admin, Relay: stale})
	if err != nil || !sc.Relayed() {
		t.Fatalf("client with a stale relay socket: %v, relayed %v", err, sc != nil && sc.Relayed())
	}
	for range 2 {
		if l, err := sc.List(ctx, v3.KindIPPool, datastore.ListOptions{Cached: true}); err != nil || len(l.Items) != 2 {
			t.Fatalf("pools with a stale relay socket: %v %v", l, err)
		}
	}
	if nc, err := kdd.New(kdd.Config{REST: admin, Relay: filepath.Join(t.TempDir(), "none.sock")}); err != nil || nc.Relayed() {
		t.Fatalf("client with no relay socket: %v, relayed %v", err, nc != nil && nc.Relayed())
	}
}

func mustCreate(t *testing.T, c datastore.Client, r v3.Resource) {
	t.Helper()
	if _, err := c.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// tokenFor returns a token of a new service account allowed verbs on
// pods only.
func tokenFor(t *testing.T, kube kubernetes.Interface, name string, verbs []string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grantPods(t, kube, name, verbs)
	tok, err := kube.CoreV1().ServiceAccounts("default").CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Status.Token
}

// grantPods lets service account default/name do verbs on pods.
func grantPods(t *testing.T, kube kubernetes.Interface, name string, verbs []string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: verbs}}}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: "default", Name: name}}}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}
