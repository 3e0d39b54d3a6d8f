//go:build privileged && integration

package e2e

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/testservers"
)

// kddNode is what the Kubernetes-datastore tests share: a real
// kube-apiserver with the manifests' CRDs, a kdd client on it and one
// node namespace whose pods are created through the API.
type kddNode struct {
	t          *testing.T
	kubeconfig string
	ctx        context.Context
	rc         *rest.Config
	kube       kubernetes.Interface
	client     *kdd.Client
	ns         ns.NetNS
}

func startKDDNode(t *testing.T) *kddNode {
	started := time.Now()
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
	t.Logf("API server and CRDs ready in %v", time.Since(started))
	return &kddNode{t: t, kubeconfig: k.Kubeconfig(), ctx: context.Background(), rc: rc, kube: kubernetes.NewForConfigOrDie(rc), client: client, ns: newNode(t)}
}

// namespace creates a Kubernetes namespace with labels.
func (n *kddNode) namespace(name string, labels map[string]string) {
	n.t.Helper()
	if _, err := n.kube.CoreV1().Namespaces().Create(n.ctx, &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
}

// pod creates pod ns/name (label app=name, service account sa, the IP
// annotations Calico's CNI writes) through the API and wires its
// namespace like Calico's CNI, with the host-side veth name Calico
// derives from the pod (kdd.VethName).
func (n *kddNode) pod(ns, name, ip, sa string, ports ...corev1.ContainerPort) *pod {
	n.t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name},
			Annotations: map[string]string{"cni.projectcalico.org/podIP": ip + "/32", "cni.projectcalico.org/podIPs": ip + "/32"}},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: sa,
			Containers: []corev1.Container{{Name: "c", Image: "busybox", Ports: ports}}},
	}
	if _, err := n.kube.CoreV1().Pods(ns).Create(n.ctx, p, metav1.CreateOptions{}); err != nil {
		n.t.Fatal(err)
	}
	return newPod(n.t, n.ns, name, kdd.VethName(ns, name), ip)
}

// runDaemon runs felix's daemon on the node in dataplane mode mode, as
// felix's agent configures it for a kdd client (startDaemon); it returns
// the dataplane, the daemon's metrics and stop.
func (n *kddNode) runDaemon(mode string) (*dataplane.Dataplane, *daemon.Metrics, func()) {
	metrics := daemon.NewMetrics(prometheus.NewRegistry())
	dp, stop := startDaemon(n.t, n.client, n.ns, metrics, mode)
	return dp, metrics, stop
}

// expectFates waits until every fate holds at once (each step includes a
// fate the previous state did not have), then reports any that differ.
func expectFates(t *testing.T, step string, checks ...check) {
	t.Helper()
	stepStart := time.Now()
	deadline := stepStart.Add(15 * time.Second)
	for {
		var wrong []string
		for _, c := range checks {
			if got := c.got(); got != c.want {
				wrong = append(wrong, c.desc)
			}
		}
		if len(wrong) == 0 {
			t.Logf("%s: %d fates hold after %v", step, len(checks), time.Since(stepStart).Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 15s: %s", step, strings.Join(wrong, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
}
