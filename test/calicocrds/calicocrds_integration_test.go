//go:build integration

package calicocrds

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/internal/testservers"
)

// calicoCRDs is the crd.projectcalico.org/v1 resource set of Calico v3.32.
var calicoCRDs = []string{
	"bgpconfigurations", "bgpfilters", "bgppeers", "blockaffinities", "caliconodestatuses",
	"clusterinformations", "felixconfigurations", "globalnetworkpolicies", "globalnetworksets",
	"hostendpoints", "ipamblocks", "ipamconfigs", "ipamhandles", "ippools", "ipreservations",
	"kubecontrollersconfigurations", "networkpolicies", "networksets", "stagedglobalnetworkpolicies",
	"stagedkubernetesnetworkpolicies", "stagednetworkpolicies", "tiers",
}

// recorder is a syncer callback that keeps the latest state.
type recorder struct {
	mu     sync.Mutex
	state  map[datastore.Key]v3.Resource
	synced chan struct{}
	once   sync.Once
}

func newRecorder() *recorder {
	return &recorder{state: map[datastore.Key]v3.Resource{}, synced: make(chan struct{})}
}

func (r *recorder) OnStatusUpdated(s datastore.SyncStatus) {
	if s == datastore.StatusInSync {
		r.once.Do(func() { close(r.synced) })
	}
}

func (r *recorder) OnUpdates(us []datastore.Update) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, u := range us {
		if u.Type == datastore.EventDeleted {
			delete(r.state, u.Key)
		} else {
			r.state[u.Key] = u.Object
		}
	}
}

func (r *recorder) has(k datastore.Key) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.state[k]
	return ok
}

// capture is a confd Applier that keeps what it was given.
type capture struct{ applied chan string }

func (c *capture) Apply(_ context.Context, text string) error {
	select {
	case c.applied <- text:
	default:
	}
	return nil
}

func gvr(resource string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: "crd.projectcalico.org", Version: "v1", Resource: resource}
}

// goBuild builds one of Tabby's commands into dir (safe off the test's
// goroutine: it reports rather than fails).
func goBuild(dir, pkg string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), "build", "-o", bin, "github.com/tabbynet/tabby/"+pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("building %s: %w\n%s", pkg, err, out)
	}
	return bin, nil
}

// TestIntegrationComponentsOnCalicoCRDs: the API server serves exactly
// Calico's crd.projectcalico.org resources (from manifests/crds); a Calico
// cluster's objects are written in Calico's stored format through the
// dynamic client (a Calico v3.30+ GlobalNetworkPolicy, an IPPool, the
// ipamconfigs object, node-a's BlockAffinity with spec.deleted "false" and
// its IPAMBlock); then felix's syncer gets in sync with Profiles derived
// from Namespaces and ServiceAccounts, confd renders node-a's block,
// calicoctl reads and refuses as Calico's does, and the calico-ipam CNI
// binary assigns from node-a's existing block and releases.
func TestIntegrationComponentsOnCalicoCRDs(t *testing.T) {
	var calicoctl, calicoIPAM string
	var errCtl, errIPAM error
	var builds sync.WaitGroup
	builds.Add(2)
	binDir := t.TempDir()
	go func() { defer builds.Done(); calicoctl, errCtl = goBuild(binDir, "calicoctl") }()
	go func() { defer builds.Done(); calicoIPAM, errIPAM = goBuild(binDir, "cni-plugin/cmd/calico-ipam") }()
	defer builds.Wait()
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Each component gets its own time: this machine may be busy.
	subCtx := func(t *testing.T) context.Context {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		return ctx
	}

	// Exactly Calico's resources are served in crd.projectcalico.org/v1.
	rl, err := kube.Discovery().ServerResourcesForGroupVersion("crd.projectcalico.org/v1")
	if err != nil {
		t.Fatal(err)
	}
	var served []string
	for _, r := range rl.APIResources {
		if !strings.Contains(r.Name, "/") {
			served = append(served, r.Name)
		}
	}
	sort.Strings(served)
	if !slices.Equal(served, calicoCRDs) {
		t.Fatalf("served crd.projectcalico.org/v1 resources:\n got %v\nwant %v", served, calicoCRDs)
	}

	// Kubernetes objects: node-a, a namespace with a service account, a pod.
	mustK := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	mustK(kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a",
		Annotations: map[string]string{"projectcalico.org/IPv4Address": "192.0.2.10/24"}}}, metav1.CreateOptions{}))
	mustK(kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a", Labels: map[string]string{"env": "prod"}}}, metav1.CreateOptions{}))
	mustK(kube.CoreV1().ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "builder"}}, metav1.CreateOptions{}))
	mustK(kube.CoreV1().Pods("team-a").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: "team-a"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}, metav1.CreateOptions{}))

	// A Calico cluster's objects, in Calico's stored format.
	for _, o := range []struct {
		resource string
		obj      map[string]any
	}{
		{"ippools", map[string]any{
			"kind": "IPPool", "metadata": map[string]any{"name": "default-ipv4-ippool",
				"annotations": map[string]any{"projectcalico.org/metadata": `{"creationTimestamp":"2026-01-01T00:00:00Z"}`}},
			"spec": map[string]any{"cidr": "10.65.0.0/16", "blockSize": int64(26), "ipipMode": "Never", "vxlanMode": "Always", "natOutgoing": true, "nodeSelector": "all()", "allowedUses": []any{"Workload", "Tunnel"}},
		}},
		{"globalnetworkpolicies", map[string]any{
			"kind": "GlobalNetworkPolicy", "metadata": map[string]any{"name": "allow-dns",
				"annotations": map[string]any{"projectcalico.org/metadata": `{"name":"allow-dns","labels":{"owner":"sec"},"creationTimestamp":null}`}},
			"spec": map[string]any{"tier": "default", "order": float64(10), "selector": "all()", "types": []any{"Egress"},
				"egress": []any{map[string]any{"action": "Allow", "protocol": "UDP", "destination": map[string]any{"ports": []any{int64(53)}}}}},
		}},
		{"ipamconfigs", map[string]any{
			"kind": "IPAMConfig", "metadata": map[string]any{"name": "default"},
			"spec": map[string]any{"strictAffinity": true, "autoAllocateBlocks": true, "maxBlocksPerHost": int64(0)},
		}},
		{"blockaffinities", map[string]any{
			"kind": "BlockAffinity", "metadata": map[string]any{"name": "node-a-10-65-54-64-26",
				"labels": map[string]any{"projectcalico.org/hostname-hash": kdd.HostnameLabelHash("node-a"), "projectcalico.org/affinity-type": "host", "projectcalico.org/ip-version": "4"}},
			"spec": map[string]any{"state": "confirmed", "node": "node-a", "type": "host", "cidr": "10.65.54.64/26", "deleted": "false"},
		}},
		{"ipamblocks", calicoBlock("10.65.54.64/26", "node-a", "k8s-pod-network.calico-1")},
		{"ipamhandles", map[string]any{
			"kind": "IPAMHandle", "metadata": map[string]any{"name": "k8s-pod-network.calico-1"},
			"spec": map[string]any{"handleID": "k8s-pod-network.calico-1", "block": map[string]any{"10.65.54.64/26": int64(1)}, "deleted": false},
		}},
	} {
		o.obj["apiVersion"] = "crd.projectcalico.org/v1"
		if _, err := dyn.Resource(gvr(o.resource)).Create(ctx, &unstructured.Unstructured{Object: o.obj}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("writing Calico's %s: %v", o.resource, err)
		}
	}

	c, err := kdd.New(kdd.Config{REST: rc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })

	t.Run("felix", func(t *testing.T) {
		ctx := subCtx(t)
		rec := newRecorder()
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); kdd.NewSyncer(c, daemon.Kinds, rec).Run(sctx) }()
		defer wg.Wait()
		select {
		case <-rec.synced:
		case <-ctx.Done():
			t.Fatal("felix's syncer never got in sync on Calico's CRDs")
		}
		for _, k := range []datastore.Key{
			{Kind: v3.KindProfile, Name: "kns.team-a"},
			{Kind: v3.KindProfile, Name: "ksa.team-a.builder"},
			{Kind: v3.KindProfile, Name: "projectcalico-default-allow"},
			{Kind: v3.KindGlobalNetworkPolicy, Name: "allow-dns"},
			{Kind: v3.KindIPPool, Name: "default-ipv4-ippool"},
		} {
			if !rec.has(k) {
				t.Errorf("felix's syncer has no %s", k)
			}
		}
	})

	t.Run("confd", func(t *testing.T) {
		ctx := subCtx(t)
		out := &capture{applied: make(chan string, 1)}
		d := confd.NewDaemon(confd.Config{NodeName: "node-a"}, out)
		sctx, stop := context.WithCancel(ctx)
		defer stop()
		var wg sync.WaitGroup
		wg.Add(2)
		go func() { defer wg.Done(); d.Run(sctx) }()
		go func() { defer wg.Done(); kdd.NewSyncer(c, confd.Kinds, d).Run(sctx) }()
		defer wg.Wait()
		select {
		case cfg := <-out.applied:
			if !strings.Contains(cfg, "10.65.54.64/26") {
				t.Errorf("confd's config lacks node-a's block 10.65.54.64/26 (Calico's affinity):\n%s", cfg)
			}
		case <-ctx.Done():
			t.Fatal("confd rendered nothing on Calico's CRDs")
		}
	})

	builds.Wait()
	if errCtl != nil || errIPAM != nil {
		t.Fatal(errCtl, errIPAM)
	}
	kubeconfig := k.Kubeconfig()
	ctl := func(ctx context.Context, stdin string, args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, calicoctl, args...)
		cmd.Env = append(os.Environ(), "DATASTORE_TYPE=kubernetes", "KUBECONFIG="+kubeconfig)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	t.Run("calicoctl", func(t *testing.T) {
		ctx := subCtx(t)
		out, err := ctl(ctx, "", "get", "profiles")
		if err != nil {
			t.Fatalf("get profiles: %v\n%s", err, out)
		}
		for _, want := range []string{"kns.team-a", "ksa.team-a.builder", "projectcalico-default-allow"} {
			if !strings.Contains(out, want) {
				t.Errorf("get profiles lacks %s:\n%s", want, out)
			}
		}
		out, err = ctl(ctx, "", "get", "globalnetworkpolicy", "allow-dns", "-o", "yaml")
		if err != nil || !strings.Contains(out, "owner: sec") {
			t.Errorf("get globalnetworkpolicy allow-dns: %v\n%s", err, out)
		}
		out, err = ctl(ctx, "", "ipam", "show", "--show-configuration")
		if err != nil || !strings.Contains(strings.ToLower(out), "strictaffinity") || !strings.Contains(out, "true") {
			t.Errorf("ipam show --show-configuration (Calico's ipamconfigs): %v\n%s", err, out)
		}
		out, err = ctl(ctx, "apiVersion: projectcalico.org/v3\nkind: Profile\nmetadata: {name: mine}\nspec: {}\n", "apply", "-f", "-")
		if err == nil || !strings.Contains(out, "read-only") {
			t.Errorf("apply of a Profile on Calico's CRDs: %v, want a read-only refusal:\n%s", err, out)
		}
		if out, err := ctl(ctx, "", "ipam", "check"); err != nil {
			t.Errorf("ipam check: %v\n%s", err, out)
		}
	})

	t.Run("calico-ipam", func(t *testing.T) {
		ctx := subCtx(t)
		kc := filepath.Join(t.TempDir(), "kubeconfig")
		data, err := os.ReadFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(kc, data, 0o600); err != nil {
			t.Fatal(err)
		}
		conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"k8s-pod-network","type":"calico","datastore_type":"kubernetes","nodename":"node-a","kubernetes":{"kubeconfig":%q},"ipam":{"type":"calico-ipam"}}`, kc)
		cni := func(command string) ([]byte, error) {
			cmd := exec.CommandContext(ctx, calicoIPAM)
			cmd.Env = append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID=cid-a", "CNI_NETNS=/var/run/netns/none",
				"CNI_IFNAME=eth0", "CNI_PATH=/nonexistent", "CNI_ARGS=K8S_POD_NAMESPACE=team-a;K8S_POD_NAME=pod-a")
			cmd.Stdin = strings.NewReader(conf)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			out, err := cmd.Output()
			if err != nil {
				return out, fmt.Errorf("%s: %w\n%s%s", command, err, out, stderr.String())
			}
			return out, nil
		}
		out, err := cni("ADD")
		if err != nil {
			t.Fatal(err)
		}
		var res struct {
			IPs []struct{ Address string } `json:"ips"`
		}
		if err := json.Unmarshal(out, &res); err != nil || len(res.IPs) != 1 {
			t.Fatalf("ADD result %s: %v", out, err)
		}
		ip := netip.MustParsePrefix(res.IPs[0].Address).Addr()
		if !netip.MustParsePrefix("10.65.54.64/26").Contains(ip) || ip == netip.MustParseAddr("10.65.54.64") {
			t.Errorf("calico-ipam gave %s; want a free address of node-a's existing block 10.65.54.64/26 (Calico's 10.65.54.64 is taken)", ip)
		}
		h, err := dyn.Resource(gvr("ipamhandles")).Get(ctx, "k8s-pod-network.cid-a", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("the ADD's handle is not at Calico's name: %v", err)
		}
		if id, _, _ := unstructured.NestedString(h.Object, "spec", "handleID"); id != "k8s-pod-network.cid-a" {
			t.Errorf("handle spec.handleID %q", id)
		}
		if _, err := cni("DEL"); err != nil {
			t.Fatal(err)
		}
		if _, err := dyn.Resource(gvr("ipamhandles")).Get(ctx, "k8s-pod-network.cid-a", metav1.GetOptions{}); err == nil {
			t.Error("the handle outlived DEL")
		}
	})
}

// calicoBlock is an IPAMBlock as Calico writes it, with its first address
// allocated to handle.
func calicoBlock(cidr, node, handle string) map[string]any {
	allocs := make([]any, 64)
	allocs[0] = int64(0)
	unalloc := make([]any, 0, 63)
	for i := 1; i < 64; i++ {
		unalloc = append(unalloc, int64(i))
	}
	name := strings.NewReplacer(".", "-", "/", "-").Replace(cidr)
	return map[string]any{
		"kind": "IPAMBlock", "metadata": map[string]any{"name": name},
		"spec": map[string]any{
			"cidr": cidr, "affinity": "host:" + node, "allocations": allocs, "unallocated": unalloc,
			"attributes": []any{map[string]any{"handle_id": handle, "secondary": map[string]any{"namespace": "team-a", "node": node, "pod": "calico-pod"}}},
			"deleted":    false, "strictAffinity": false, "sequenceNumber": int64(1),
			"sequenceNumberForAllocation": map[string]any{"0": int64(0)},
		},
	}
}
