//go:build privileged && integration

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// benchNodes is how many node namespaces a burst spreads over.
const benchNodes = 3

// BenchmarkCNIDatastores times the real calico plugin's ADD on both
// datastores side by side, same run: etcd (a real etcd) and the
// Kubernetes datastore (a real kube-apiserver with Calico's CRDs; the
// plugin reads the pod and its namespace and annotates the pod). Three
// node namespaces, each with its own nodename. The binaries are laid out
// as install-cni installs them (sideBinaries: calico-k8s as calico on the
// Kubernetes datastore).
//
//   - single: b.N pods one after another on one node, the two datastores
//     alternating pod by pod (ABBA), each pod deleted after its ADD.
//   - burst: b.N/6 rounds (at least 3); in each, a fresh pool (the last
//     round's disabled), so every node must claim a new block, then
//     TABBY_BENCH_BURST (default 9) ADDs started at once, spread over the
//     three nodes: the claims race. Rounds alternate which datastore goes
//     first.
//
// It reports p50/p99 (of few samples p99 is the maximum) per ADD in
// milliseconds, the burst's wall time p50, and the Kubernetes/etcd ratio
// of the p50s (goal <= 1.5). Run with make bench-cni, or:
//
//	go test -tags privileged,integration -run '^$' -bench CNIDatastores -benchtime 60x ./cni-plugin/e2e/
//
// With TABBY_BENCH_BASELINE=<folder holding another build's calico and
// calico-k8s> (say, main's), the same run also times that build on both
// datastores (sides etcd-base and kdd-base, each with its own servers):
// before and after under the same load.
func BenchmarkCNIDatastores(b *testing.B) {
	burst := 9
	if v := os.Getenv("TABBY_BENCH_BURST"); v != "" {
		fmt.Sscan(v, &burst)
	}
	b.Setenv("TABBY_CNI_HINT_DIR", b.TempDir())
	sides := []*dsSide{newEtcdSide(b, ""), newKDDSide(b, "")}
	if dir := os.Getenv("TABBY_BENCH_BASELINE"); dir != "" {
		sides = append(sides, newEtcdSide(b, dir), newKDDSide(b, dir))
	}
	rounds := max(3, b.N/6)
	for _, s := range sides {
		s.createPods(b, "single", b.N, 1)
		s.createPods(b, "burst", rounds*burst, benchNodes)
		s.createPods(b, "warm-up", 1, 1)
		s.newPool(b, 0)
		// Untimed: the API server's watch cache of a CRD it has just
		// created is not ready, and the first list of it is answered 429
		// with Retry-After 1 s (client-go waits and retries): a start-up
		// cost of the test's API server, not of the plugin.
		p := s.nodes[0].newPod("warm-up-0")
		if err := s.nodes[0].add(p); err != nil {
			b.Fatalf("%s warm-up ADD: %v", s.name, err)
		}
		if err := s.nodes[0].del(p); err != nil {
			b.Fatalf("%s warm-up DEL: %v", s.name, err)
		}
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, s := range turns(sides, i) {
			p := s.nodes[0].newPod(fmt.Sprintf("single-%d", i))
			start := time.Now()
			if err := s.nodes[0].add(p); err != nil {
				b.Fatalf("%s ADD single-%d: %v", s.name, i, err)
			}
			s.single = append(s.single, time.Since(start))
			if err := s.nodes[0].del(p); err != nil {
				b.Fatalf("%s DEL single-%d: %v", s.name, i, err)
			}
		}
	}
	for r := 0; r < rounds; r++ {
		for _, s := range turns(sides, r) {
			s.newPool(b, r+1)
			s.runBurst(b, r, burst)
		}
	}
	b.StopTimer()
	for _, s := range sides {
		reportP50P99(b, s.name+"-single-add", s.single)
		reportP50P99(b, s.name+"-burst-add", s.burst)
		reportP50P99(b, s.name+"-burst-wall", s.walls)
	}
	ratio := func(what string, k, e []time.Duration) {
		b.ReportMetric(float64(p50(k))/float64(p50(e)), "kdd/etcd-"+what+"-p50")
	}
	ratio("single", sides[1].single, sides[0].single)
	ratio("burst", sides[1].burst, sides[0].burst)
	if len(sides) == 4 {
		b.ReportMetric(float64(p50(sides[3].single))/float64(p50(sides[2].single)), "base-kdd/etcd-single-p50")
		b.ReportMetric(float64(p50(sides[3].burst))/float64(p50(sides[2].burst)), "base-kdd/etcd-burst-p50")
	}
}

// turns orders the sides for round i: forwards on even rounds, backwards
// on odd ones (A B, B A, ...), so a change in the machine's load falls on
// all alike.
func turns(sides []*dsSide, i int) []*dsSide {
	if i%2 == 0 {
		return sides
	}
	out := slices.Clone(sides)
	slices.Reverse(out)
	return out
}

// dsSide is one datastore's nodes, each a node namespace with its CNI
// config naming that node.
type dsSide struct {
	name   string
	client datastore.Client
	kube   kubernetes.Interface // Kubernetes datastore only: pods to create
	binDir string               // the plugin binaries
	nodes  []*cluster

	single, burst, walls []time.Duration
}

// nodeName is node i of the side: the sides' node names differ, so their
// block hints and claim locks (kept per node) do not mix.
func (s *dsSide) nodeName(i int) string { return fmt.Sprintf("%s-node-%d", s.name, i+1) }

// sideBinaries is the plugin build a side runs: this tree's, or the one
// in baseline (then the side's name ends in -base), laid out as
// install-cni installs it: on the Kubernetes datastore calico-k8s goes in
// calico's place (kubernetes), so that side runs calico-k8s as calico. A
// baseline is laid out the same way (it once was not, which made the
// baseline's Kubernetes ADDs start two processes, ~7-9 ms slower than the
// same build as this tree's: an A/A run showed it), so a baseline from
// before install-cni did so is timed faster than it ran.
func sideBinaries(b testing.TB, name, baseline string, kubernetes bool) (string, string) {
	src := cniBinDir(b)
	if baseline != "" {
		name, src = name+"-base", baseline
	}
	if !kubernetes {
		return name, src
	}
	dir := b.TempDir()
	entries, err := os.ReadDir(src)
	if err != nil {
		b.Fatal(err)
	}
	for _, e := range entries {
		from := e.Name()
		if from == "calico" {
			from = "calico-k8s"
		}
		data, err := os.ReadFile(filepath.Join(src, from))
		if err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), data, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	return name, dir
}

// newEtcdSide: a real etcd, the plugin reaching it on its unix socket.
func newEtcdSide(b testing.TB, baseline string) *dsSide {
	e := testservers.StartEtcd(b)
	client, err := etcd.New(etcd.Config{Endpoints: []string{e.Endpoint()}})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { client.Close() })
	s := &dsSide{client: client}
	s.name, s.binDir = sideBinaries(b, "etcd", baseline, false)
	for i := 0; i < benchNodes; i++ {
		s.addNode(b, map[string]any{"datastore_type": "etcdv3", "etcd_endpoints": e.UnixEndpoint()}, nil)
	}
	return s
}

// newKDDSide: a real kube-apiserver with Calico's CRDs, reached from each
// node namespace through a loopback proxy.
func newKDDSide(b testing.TB, baseline string) *dsSide {
	k := testservers.StartKubeAPIServer(b, testservers.WithAPIServerFlags("--shutdown-watch-termination-grace-period=1s"))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		b.Fatal(err)
	}
	rc.QPS = -1
	testservers.ApplyCRDs(b, rc, "../../manifests/crds")
	client, err := kdd.New(kdd.Config{REST: rc, QPS: -1})
	if err != nil {
		b.Fatal(err)
	}
	s := &dsSide{client: client, kube: kubernetes.NewForConfigOrDie(rc)}
	s.name, s.binDir = sideBinaries(b, "kdd", baseline, true)
	for i := 0; i < benchNodes; i++ {
		n := netnstest.NewNode(b)
		s.addNode(b, map[string]any{"datastore_type": "kubernetes", "policy": map[string]any{"type": "k8s"},
			"kubernetes": map[string]any{"kubeconfig": nodeKubeconfig(b, n, k)}}, &cluster{t: b, node: n})
	}
	return s
}

// addNode adds a node (c, or a fresh namespace when nil) whose conflist
// holds the calico plugin with ds's settings.
func (s *dsSide) addNode(b testing.TB, ds map[string]any, c *cluster) {
	if c == nil {
		c = &cluster{t: b, node: netnstest.NewNode(b)}
	}
	name := s.nodeName(len(s.nodes))
	plugin := map[string]any{"type": "calico", "log_level": "info", "nodename": name, "mtu": 1440,
		"ipam": map[string]any{"type": "calico-ipam"}}
	for k, v := range ds {
		plugin[k] = v
	}
	conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{plugin}})
	list, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		b.Fatal(err)
	}
	c.client, c.list = s.client, list
	c.cni = libcni.NewCNIConfigWithCacheDir([]string{s.binDir}, b.TempDir(), nil)
	s.nodes = append(s.nodes, c)
	if s.kube != nil {
		if _, err := s.kube.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// createPods creates, on the Kubernetes datastore, the pods prefix-0..n-1
// the plugin will read and annotate, spread over the first nodes.
func (s *dsSide) createPods(b testing.TB, prefix string, n, nodes int) {
	if s.kube == nil {
		return
	}
	for i := 0; i < n; i++ {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i), Namespace: "default"},
			Spec: corev1.PodSpec{NodeName: s.nodeName(i % nodes), Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := s.kube.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// newPool creates pool i (10.<64+i>.0.0/16) and disables pool i-1, so the
// next ADDs on every node claim a new block.
func (s *dsSide) newPool(b testing.TB, i int) {
	ctx := context.Background()
	if i > 0 {
		r, err := s.client.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: fmt.Sprintf("bench-%d", i-1)})
		if err != nil {
			b.Fatal(err)
		}
		old := r.(*v3.IPPool)
		old.Spec.Disabled = true
		if _, err := s.client.Update(ctx, old); err != nil {
			b.Fatal(err)
		}
	}
	_, err := s.client.Create(ctx, &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i)},
		Spec:       v3.IPPoolSpec{CIDR: fmt.Sprintf("10.%d.0.0/16", 64+i)}})
	if err != nil {
		b.Fatal(err)
	}
}

// runBurst starts n ADDs at once over the nodes (pod j on node j%3),
// records each ADD's time and the whole burst's, then deletes the pods.
func (s *dsSide) runBurst(b testing.TB, round, n int) {
	pods := make([]*pod, n)
	for j := range pods {
		pods[j] = s.nodes[j%benchNodes].newPod(fmt.Sprintf("burst-%d", round*n+j))
	}
	took := make([]time.Duration, n)
	errs := make([]error, n)
	var ready, done sync.WaitGroup
	startGate := make(chan struct{})
	ready.Add(n)
	done.Add(n)
	for j := range pods {
		go func() {
			defer done.Done()
			ready.Done()
			<-startGate
			t0 := time.Now()
			errs[j] = s.nodes[j%benchNodes].add(pods[j])
			took[j] = time.Since(t0)
		}()
	}
	ready.Wait()
	start := time.Now()
	close(startGate)
	done.Wait()
	s.walls = append(s.walls, time.Since(start))
	for j, err := range errs {
		if err != nil {
			b.Fatalf("%s burst %d ADD %d: %v", s.name, round, j, err)
		}
	}
	s.burst = append(s.burst, took...)
	for j, p := range pods {
		if err := s.nodes[j%benchNodes].del(p); err != nil {
			b.Fatalf("%s burst %d DEL %d: %v", s.name, round, j, err)
		}
	}
}

func p50(ds []time.Duration) time.Duration {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[len(s)/2]
}

// reportP50P99 reports p50 and p99 (nearest rank) in milliseconds.
func reportP50P99(b *testing.B, what string, ds []time.Duration) {
	if len(ds) == 0 {
		return
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	b.ReportMetric(ms(s[len(s)/2]), what+"-p50-ms")
	b.ReportMetric(ms(s[min(len(s)-1, (len(s)*99+99)/100-1)]), what+"-p99-ms")
}
