//go:build privileged && integration

package e2e

import (
	"context"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedKubernetesServicesMatch: Calico policies with services
// matches, written through the Kubernetes datastore, enforced by felix on
// real packets as the Service's EndpointSlices change (written through the
// API as the EndpointSlice controller would). An egress Allow to Service
// prod/api reaches exactly its endpoints on its port, follows a scale-up
// and a scale-down; an egress Deny by the service blocks exactly its
// endpoints on its port; an ingress Allow from Service dev/client admits
// its endpoints only. Both dataplane modes (iptables, nftables).
func TestPrivilegedKubernetesServicesMatch(t *testing.T) { forEachMode(t, testKubernetesServicesMatch) }

func testKubernetesServicesMatch(t *testing.T, mode string) {
	started := time.Now()
	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags("--shutdown-watch-termination-grace-period=1s"))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	testservers.ApplyCRDs(t, rc, "../../manifests/crds")
	kube := kubernetes.NewForConfigOrDie(rc)
	client, err := kdd.New(kdd.Config{REST: rc})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	t.Logf("API server and CRDs ready in %v", time.Since(started))

	for _, ns := range []string{"prod", "dev"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	nodeNS := newNode(t)
	kubePod := func(ns, name, ip string) *pod {
		t.Helper()
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name},
				Annotations: map[string]string{"cni.projectcalico.org/podIP": ip + "/32", "cni.projectcalico.org/podIPs": ip + "/32"}},
			Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
		}
		if _, err := kube.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		return newPod(t, nodeNS, name, kdd.VethName(ns, name), ip)
	}
	api1 := kubePod("prod", "api-1", "10.65.0.1")
	api2 := kubePod("prod", "api-2", "10.65.0.2")
	other := kubePod("prod", "other", "10.65.0.3")
	cli := kubePod("dev", "client", "10.65.0.4")

	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	dp := newModeDataplane(t, mode, nodeNS.Path(), dataplane.Config{
		Runner: dataplane.ExecRunner{NetnsPath: nodeNS.Path()}, V4: dataplane.BackendDefaultV4,
		RefreshInterval: 5 * time.Second, Logger: log,
	})
	d := daemon.New(daemon.Config{NodeName: node, Rules: rules.DefaultConfig(), Dataplane: dp, Logger: log,
		Metrics: daemon.NewMetrics(prometheus.NewRegistry()), FollowServices: daemon.FollowsServices(client)})
	runCtx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- d.Run(runCtx, daemon.NewSyncer(client, d)) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("daemon: %v", err)
		}
	})

	// The Services, and their EndpointSlices as the controller writes them.
	for _, s := range []struct{ ns, name string }{{"prod", "api"}, {"dev", "client"}} {
		if _, err := kube.CoreV1().Services(s.ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": s.name}, Ports: []corev1.ServicePort{{Port: tcpPortA}}}},
			metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setSlice := func(ns, name, svc string, ips ...string) {
		t.Helper()
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{discoveryv1.LabelServiceName: svc}}, AddressType: discoveryv1.AddressTypeIPv4,
			Ports: []discoveryv1.EndpointPort{{Protocol: new(corev1.ProtocolTCP), Port: new(int32(tcpPortA))}}}
		for _, ip := range ips {
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
		}
		slices := kube.DiscoveryV1().EndpointSlices(ns)
		cur, err := slices.Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			es.ResourceVersion = cur.ResourceVersion
			_, err = slices.Update(ctx, es, metav1.UpdateOptions{})
		} else {
			_, err = slices.Create(ctx, es, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatalf("writing EndpointSlice %s/%s: %v", ns, name, err)
		}
	}
	setSlice("prod", "api-x1", "api", "10.65.0.1")
	setSlice("dev", "client-x1", "client", "10.65.0.4")

	write := func(p *v3.NetworkPolicy) {
		t.Helper()
		if cur, err := client.Get(ctx, datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: p.Namespace, Name: p.Name}); err == nil {
			p.ResourceVersion = cur.GetResourceVersion()
			_, err = client.Update(ctx, p)
			if err != nil {
				t.Fatalf("updating %s/%s: %v", p.Namespace, p.Name, err)
			}
			return
		}
		if _, err := client.Create(ctx, p); err != nil {
			t.Fatalf("creating %s/%s: %v", p.Namespace, p.Name, err)
		}
	}
	remove := func(ns, name string) {
		t.Helper()
		if _, err := client.Delete(ctx, datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: ns, Name: name}, datastore.DeleteOptions{}); err != nil {
			t.Fatalf("deleting %s/%s: %v", ns, name, err)
		}
	}
	svc := func(ns, name string) *v3.ServiceMatch { return &v3.ServiceMatch{Namespace: ns, Name: name} }
	egressPolicy := func(name string, rules ...v3.Rule) *v3.NetworkPolicy {
		return &v3.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: name},
			Spec: v3.NetworkPolicySpec{Selector: "app == 'client'", Types: []v3.PolicyType{v3.PolicyTypeEgress}, Egress: rules}}
	}
	expect := func(step string, checks ...check) {
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
	tcp := func(from, to *pod, port int) func() bool { return func() bool { return from.tcp(to, port) } }

	expect("no policy: everything allowed",
		check{"dataplane in sync", dp.InSync, true},
		check{"client->api-1:A", tcp(cli, api1, tcpPortA), true},
		check{"client->other:A", tcp(cli, other, tcpPortA), true},
	)

	write(egressPolicy("to-api", v3.Rule{Action: v3.Allow, Destination: v3.EntityRule{Services: svc("prod", "api")}}))
	expect("egress allowed to Service prod/api only: its endpoint, on its port",
		check{"client->api-1:A allowed", tcp(cli, api1, tcpPortA), true},
		check{"client->api-1:B denied (not the service's port)", tcp(cli, api1, tcpPortB), false},
		check{"client->api-2:A denied (not an endpoint yet)", tcp(cli, api2, tcpPortA), false},
		check{"client->other:A denied", tcp(cli, other, tcpPortA), false},
	)

	setSlice("prod", "api-x1", "api", "10.65.0.1", "10.65.0.2")
	expect("scale-up: api-2 joins the slice",
		check{"client->api-2:A allowed", tcp(cli, api2, tcpPortA), true},
		check{"client->api-1:A allowed", tcp(cli, api1, tcpPortA), true},
		check{"client->other:A denied", tcp(cli, other, tcpPortA), false},
	)

	setSlice("prod", "api-x1", "api", "10.65.0.2")
	expect("scale-down: api-1 leaves the slice",
		check{"client->api-1:A denied", tcp(cli, api1, tcpPortA), false},
		check{"client->api-2:A allowed", tcp(cli, api2, tcpPortA), true},
	)

	remove("dev", "to-api")
	write(egressPolicy("deny-api",
		v3.Rule{Action: v3.Deny, Destination: v3.EntityRule{Services: svc("prod", "api")}},
		v3.Rule{Action: v3.Allow}))
	expect("egress Deny by Service prod/api: exactly its endpoint on its port",
		check{"client->api-2:A denied", tcp(cli, api2, tcpPortA), false},
		check{"client->api-2:B allowed (not the service's port)", tcp(cli, api2, tcpPortB), true},
		check{"client->api-1:A allowed (no longer an endpoint)", tcp(cli, api1, tcpPortA), true},
		check{"client->other:A allowed", tcp(cli, other, tcpPortA), true},
	)

	remove("dev", "deny-api")
	write(&v3.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "prod", Name: "from-client-svc"},
		Spec: v3.NetworkPolicySpec{Selector: "app == 'other'", Types: []v3.PolicyType{v3.PolicyTypeIngress},
			Ingress: []v3.Rule{{Action: v3.Allow, Source: v3.EntityRule{Services: svc("dev", "client")}}}}})
	expect("ingress Allow from Service dev/client: its endpoints' addresses, any port",
		check{"client->other:A allowed", tcp(cli, other, tcpPortA), true},
		check{"client->other:B allowed", tcp(cli, other, tcpPortB), true},
		check{"api-2->other:A denied", tcp(api2, other, tcpPortA), false},
	)
	setSlice("dev", "client-x1", "client")
	expect("the client leaves its Service: denied",
		check{"client->other:A denied", tcp(cli, other, tcpPortA), false},
	)
}
