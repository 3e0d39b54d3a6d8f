//go:build privileged && integration

package e2e

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
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
	n := startKDDNode(t)
	kube, client, ctx := n.kube, n.client, n.ctx

	for _, ns := range []string{"prod", "dev"} {
		n.namespace(ns, nil)
	}
	kubePod := func(ns, name, ip string) *pod { return n.pod(ns, name, ip, "") }
	api1 := kubePod("prod", "api-1", "10.65.0.1")
	api2 := kubePod("prod", "api-2", "10.65.0.2")
	other := kubePod("prod", "other", "10.65.0.3")
	cli := kubePod("dev", "client", "10.65.0.4")

	dp, _, _ := n.runDaemon(mode)

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
	expect := func(step string, checks ...check) { t.Helper(); expectFates(t, step, checks...) }
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
