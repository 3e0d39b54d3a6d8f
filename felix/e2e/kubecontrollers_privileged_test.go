//go:build privileged && integration

package e2e

import (
	"context"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/kubecontrollers"
	"github.com/tabbynet/tabby/kubecontrollers/config"
)

// TestPrivilegedKubeControllersEtcdEnforced: with the etcd datastore,
// Kubernetes objects reach felix only through kube-controllers. A
// Kubernetes NetworkPolicy, then a namespace label change, then a pod label
// change each change what real TCP connections between two pods do.
func TestPrivilegedKubeControllersEtcdEnforced(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(rc)
	c, err := etcd.New(etcd.Config{Endpoints: []string{k.Etcd.Endpoint()}, NewTransport: etcdlib.New})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	nodeNS := newNode(t)
	web := newPod(t, nodeNS, "web", "caliaaaa", "10.65.0.1")
	client := newPod(t, nodeNS, "client", "calicccc", "10.65.0.3")

	// Kubernetes: two namespaces, a pod in each.
	for ns, team := range map[string]string{"prod": "a", "dev": "b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
			Labels: map[string]string{"team": team}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []struct {
		ns, name, app string
		pod           *pod
	}{{"prod", "web", "web", web}, {"dev", "client", "client", client}} {
		if _, err := kube.CoreV1().Pods(p.ns).Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Namespace: p.ns,
			Labels: map[string]string{"app": p.app}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The endpoint as Tabby's CNI plugin writes it in etcd mode: no
		// pod labels, the namespace's profile.
		name, err := kdd.WorkloadEndpointName(node, p.name, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Create(ctx, &v3.WorkloadEndpoint{TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.ns, Labels: map[string]string{
				"projectcalico.org/namespace": p.ns, "projectcalico.org/orchestrator": "k8s"}},
			Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: p.name, Endpoint: "eth0", ContainerID: "cid-" + p.name,
				InterfaceName: p.pod.iface, IPNetworks: []string{p.pod.ip.String() + "/32"}, Profiles: []string{"kns." + p.ns}}}); err != nil {
			t.Fatal(err)
		}
	}

	spec := v3.KubeControllersDefaults()
	spec.PrometheusMetricsPort = new(0)
	if _, err := c.Create(ctx, &v3.KubeControllersConfiguration{TypeMeta: metav1.TypeMeta{Kind: v3.KindKubeControllersConfiguration, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: spec}); err != nil {
		t.Fatal(err)
	}
	kctx, stop := context.WithCancel(context.Background())
	kdone := make(chan error, 1)
	go func() {
		kdone <- kubecontrollers.Run(kctx, kubecontrollers.Options{
			Env:  config.FromEnv(func(k string) string { return map[string]string{"DATASTORE_TYPE": "etcdv3"}[k] }),
			Kube: kube, Client: c,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})),
		})
	}()
	t.Cleanup(func() { stop(); <-kdone })

	dp := runDaemon(t, c, nodeNS, nil)
	eventually(t, 30*time.Second, "client->web allowed by the namespace profiles kube-controllers wrote", func() bool {
		return dp.InSync() && client.tcp(web, tcpPortA)
	})

	// A Kubernetes NetworkPolicy: web accepts app=client from team=b
	// namespaces on 8080 only.
	tcp := corev1.ProtocolTCP
	port := intstr.FromInt32(tcpPortA)
	if _, err := kube.NetworkingV1().NetworkPolicies("prod").Create(ctx, &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "b"}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "client"}},
				}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &port}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the NetworkPolicy enforced: 8080 allowed, 9090 denied", func() bool {
		return !client.tcp(web, tcpPortB) && client.tcp(web, tcpPortA)
	})

	// The client's namespace label changes: no longer team=b.
	setLabels := func(ns string, labels map[string]string) {
		n, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Labels = labels
		if _, err := kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setLabels("dev", map[string]string{"team": "c"})
	eventually(t, 30*time.Second, "namespace label change enforced: 8080 denied", func() bool { return !client.tcp(web, tcpPortA) })
	setLabels("dev", map[string]string{"team": "b"})
	eventually(t, 30*time.Second, "namespace label restored: 8080 allowed", func() bool { return client.tcp(web, tcpPortA) })

	// The client pod's label changes: no longer app=client.
	p, err := kube.CoreV1().Pods("dev").Get(ctx, "client", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Labels = map[string]string{"app": "other"}
	if _, err := kube.CoreV1().Pods("dev").Update(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "pod label change enforced: 8080 denied", func() bool { return !client.tcp(web, tcpPortA) })
}
