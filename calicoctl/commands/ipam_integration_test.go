//go:build integration

package commands

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/ipam"
)

// world plants nodes, pods and allocations the way the cluster would:
// Calico resources in etcd mode, native Nodes and Pods in Kubernetes mode.
type world struct {
	t    *testing.T
	ctx  context.Context
	c    datastore.Client
	kube kubernetes.Interface // nil in etcd mode
}

func newWorld(t *testing.T, b cliBackend) *world {
	spec, err := dsconfig.Load("/nonexistent/calicoctl.cfg", false, func(k string) string { return b.env[k] })
	if err != nil {
		t.Fatal(err)
	}
	c, err := b.backends.New(spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	w := &world{t: t, ctx: context.Background(), c: c}
	if kc := b.env["KUBECONFIG"]; kc != "" {
		rc, err := clientcmd.BuildConfigFromFlags("", kc)
		if err != nil {
			t.Fatal(err)
		}
		if w.kube, err = kubernetes.NewForConfig(rc); err != nil {
			t.Fatal(err)
		}
		// Pods need their service account; no controller manager runs here.
		_, err = w.kube.CoreV1().ServiceAccounts("default").Create(w.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	return w
}

func (w *world) addNode(name string) {
	w.t.Helper()
	var err error
	if w.kube != nil {
		_, err = w.kube.CoreV1().Nodes().Create(w.ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	} else {
		n := &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion}, ObjectMeta: metav1.ObjectMeta{Name: name}}
		_, err = w.c.Create(w.ctx, n)
	}
	if err != nil {
		w.t.Fatalf("creating node %s: %v", name, err)
	}
}

func (w *world) deleteNode(name string) {
	w.t.Helper()
	var err error
	if w.kube != nil {
		err = w.kube.CoreV1().Nodes().Delete(w.ctx, name, metav1.DeleteOptions{})
	} else {
		_, err = w.c.Delete(w.ctx, datastore.Key{Kind: v3.KindNode, Name: name}, datastore.DeleteOptions{})
	}
	if err != nil {
		w.t.Fatalf("deleting node %s: %v", name, err)
	}
}

// addPod makes pod's WorkloadEndpoint with ip: a WorkloadEndpoint in etcd
// mode, a scheduled Pod carrying Calico's podIP annotation in Kubernetes
// mode.
func (w *world) addPod(node, pod string, ip netip.Addr) {
	w.t.Helper()
	if w.kube != nil {
		no := false
		_, err := w.kube.CoreV1().Pods("default").Create(w.ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: pod, Annotations: map[string]string{"cni.projectcalico.org/podIP": ip.String() + "/32"}},
			Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: &no,
				Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			w.t.Fatalf("creating pod %s: %v", pod, err)
		}
		return
	}
	name, err := kdd.WorkloadEndpointName(node, pod, "eth0")
	if err != nil {
		w.t.Fatal(err)
	}
	wep := &v3.WorkloadEndpoint{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: pod, Endpoint: "eth0",
			IPNetworks: []string{ip.String() + "/32"}, InterfaceName: "cali" + pod, Profiles: []string{"kns.default"}},
	}
	if _, err := w.c.Create(w.ctx, wep); err != nil {
		w.t.Fatalf("creating workload endpoint for %s: %v", pod, err)
	}
}

func (w *world) deletePod(node, pod string) {
	w.t.Helper()
	var err error
	if w.kube != nil {
		zero := int64(0)
		err = w.kube.CoreV1().Pods("default").Delete(w.ctx, pod, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	} else {
		name, _ := kdd.WorkloadEndpointName(node, pod, "eth0")
		_, err = w.c.Delete(w.ctx, datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: "default", Name: name}, datastore.DeleteOptions{})
	}
	if err != nil {
		w.t.Fatalf("deleting pod %s: %v", pod, err)
	}
}

func (w *world) allocate(node, handle string, attrs map[string]string) netip.Addr {
	w.t.Helper()
	ips, err := ipam.New(w.c, ipam.Config{}).AutoAssign(w.ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Attrs: attrs, Hostname: node})
	if err != nil || len(ips) != 1 {
		w.t.Fatalf("allocating for %s on %s: %v %v", handle, node, ips, err)
	}
	return ips[0]
}

func (w *world) allocated() []string {
	w.t.Helper()
	als, err := ipam.New(w.c, ipam.Config{}).ListAllocations(w.ctx, nil)
	if err != nil {
		w.t.Fatal(err)
	}
	var out []string
	for _, a := range als {
		out = append(out, a.IP.String()+" "+a.Handle)
	}
	slices.Sort(out)
	return out
}

func podAttrs(node, pod string) map[string]string {
	return map[string]string{ipam.AttrNamespace: "default", ipam.AttrPod: pod, ipam.AttrNode: node}
}

// testIPAM plants leaks (a pod allocation without a WorkloadEndpoint, the
// blocks and tunnel address of a node that is then deleted), checks, and
// releases from the report: exactly the leaks go, the live pod's address
// and a pod that appeared between check and release stay.
func testIPAM(t *testing.T, b cliBackend) {
	w := newWorld(t, b)
	tmp := t.TempDir()
	report := filepath.Join(tmp, "report.json")
	run := func(transcript *strings.Builder, stdin string, wantCode int, cmd string) {
		t.Helper()
		out, code := b.run(t, stdin, strings.Fields(cmd)...)
		if code != wantCode {
			t.Errorf("calicoctl %s: exit %d, want %d\n%s", cmd, code, wantCode, out)
		}
		transcript.WriteString(strings.ReplaceAll(out, tmp, "<tmp>") + "\n")
	}
	var tr strings.Builder
	run(&tr, "", 0, "ipam show")
	run(&tr, `apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: ipam-v4}
spec: {cidr: 10.50.0.0/24, blockSize: 29}
---
apiVersion: projectcalico.org/v3
kind: IPPool
metadata: {name: ipam-v6}
spec: {cidr: "fd00:50::/64", blockSize: 122}
`, 0, "apply -f -")

	w.addNode("live-node")
	w.addNode("gone-node")
	live := w.allocate("live-node", "k8s-pod-network.live", podAttrs("live-node", "live-pod"))
	w.addPod("live-node", "live-pod", live)
	ghost := w.allocate("live-node", "k8s-pod-network.ghost", podAttrs("live-node", "ghost-pod"))
	late := w.allocate("live-node", "k8s-pod-network.late", podAttrs("live-node", "late-pod"))
	gonePod := w.allocate("gone-node", "k8s-pod-network.gone", podAttrs("gone-node", "gone-pod"))
	tunnel := w.allocate("gone-node", "ipip-tunnel-addr-gone-node", map[string]string{ipam.AttrNode: "gone-node", ipam.AttrType: "ipipTunnelAddress"})
	w.deleteNode("gone-node")
	t.Logf("live %s ghost %s late %s gone-pod %s tunnel %s", live, ghost, late, gonePod, tunnel)

	run(&tr, "", 0, "ipam show")
	run(&tr, "", 0, "ipam show --show-blocks")
	run(&tr, "", 0, "ipam show --ip="+live.String())
	run(&tr, "", 0, "ipam show --ip="+tunnel.String())
	run(&tr, "", 0, "ipam show --ip=10.50.0.200")
	run(&tr, "", 0, "ipam show --ip=192.168.9.9")
	run(&tr, "", 1, "ipam show --ip=10.50.0.300")
	// An endpoint using an address IPAM never allocated: an inconsistency.
	w.addPod("live-node", "stray-pod", netip.MustParseAddr("10.50.0.77"))
	run(&tr, "", 0, "ipam check --grace=0s -o "+report)
	run(&tr, "", 0, "ipam check")
	w.deletePod("live-node", "stray-pod")

	// Between check and release the late pod gets its endpoint: the
	// re-check must spare it.
	w.addPod("live-node", "late-pod", late)
	run(&tr, "", 0, "ipam release --from-report="+report)
	want := []string{live.String() + " k8s-pod-network.live", late.String() + " k8s-pod-network.late"}
	slices.Sort(want)
	if got := w.allocated(); !slices.Equal(got, want) {
		t.Errorf("after release --from-report, allocations = %v, want %v", got, want)
	}
	run(&tr, "", 0, "ipam check --grace=0s")
	run(&tr, "", 0, "ipam show --show-blocks")
	run(&tr, "", 0, "ipam release --from-report="+report)

	// Single addresses.
	run(&tr, "", 1, "ipam release --ip="+live.String())
	run(&tr, "", 1, "ipam release --ip=10.50.0.200")
	w.deletePod("live-node", "late-pod")
	run(&tr, "", 0, "ipam release --ip="+late.String())
	run(&tr, "", 0, "ipam release --ip="+live.String()+" --force")
	if got := w.allocated(); len(got) != 0 {
		t.Errorf("after releasing both, allocations = %v", got)
	}

	// Bad input.
	run(&tr, "", 1, "ipam release")
	run(&tr, "", 1, "ipam release --ip=10.50.0.1 --from-report="+report)
	run(&tr, "", 1, "ipam release --ip=nonsense")
	run(&tr, "", 1, "ipam release --from-report="+filepath.Join(tmp, "missing.json"))
	run(&tr, "", 1, "ipam release --from-report=testdata/cli/pools.yaml")
	run(&tr, "", 1, "ipam check --grace=-1s")
	run(&tr, "", 1, "ipam frobnicate")

	// Configuration.
	run(&tr, "", 0, "ipam show --show-configuration")
	run(&tr, "", 0, "ipam configure --strictaffinity=true")
	run(&tr, "", 0, "ipam show --show-configuration")
	run(&tr, "", 0, "ipam configure --strictaffinity=false --max-blocks-per-host=4")
	run(&tr, "", 0, "get ipamconfigurations default -o yaml")
	run(&tr, "", 1, "ipam configure")
	run(&tr, "", 1, "ipam configure --strictaffinity=maybe")
	run(&tr, "", 1, "ipam configure --max-blocks-per-host=-3")
	run(&tr, "", 0, "ipam configure --kubevirt-ip-persistence=Enabled --ip-cooldown-seconds=0")
	run(&tr, "", 1, "ipam configure --kubevirt-ip-persistence=Disabled")
	run(&tr, "", 1, "ipam configure --kubevirt-ip-persistence=Sometimes")
	run(&tr, "", 1, "ipam configure --ip-cooldown-seconds=30")
	checkGolden(t, "ipam", tr.String())
}
