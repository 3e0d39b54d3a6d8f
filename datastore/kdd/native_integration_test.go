//go:build integration

package kdd

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func must[T any](t *testing.T) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// nextEvent waits for the next event of a watch.
func nextEvent(t *testing.T, w datastore.Watcher) datastore.Event {
	t.Helper()
	select {
	case ev, ok := <-w.ResultChan():
		if !ok {
			t.Fatal("watch closed")
		}
		if ev.Type == datastore.EventError {
			t.Fatalf("watch error: %v", ev.Err)
		}
		return ev
	case <-time.After(30 * time.Second):
		t.Fatal("no watch event within 30s")
	}
	return datastore.Event{}
}

// wantReadOnly checks that every write to a derived object is refused
// with ErrReadOnly and a message saying what to change instead.
func wantReadOnly(t *testing.T, c *Client, obj v3.Resource, hint string) {
	t.Helper()
	ctx := ctxT(t)
	write := obj.DeepCopyObject().(v3.Resource)
	_, errC := c.Create(ctx, write)
	_, errU := c.Update(ctx, write)
	_, errD := c.Delete(ctx, datastore.KeyOf(obj), datastore.DeleteOptions{})
	for op, err := range map[string]error{"create": errC, "update": errU, "delete": errD} {
		if !errors.Is(err, datastore.ErrReadOnly) {
			t.Errorf("%s %s: %v, want ErrReadOnly", op, datastore.KeyOf(obj), err)
		} else if !strings.Contains(err.Error(), hint) {
			t.Errorf("%s %s: error %q does not say what to change (%q)", op, datastore.KeyOf(obj), err, hint)
		}
	}
}

// TestNativeMappings creates native Kubernetes objects in a real API
// server and checks the Calico objects derived from them: get, list,
// watch, field by field, and that they cannot be written.
func TestNativeMappings(t *testing.T) {
	s := startServer(t)
	c := s.client(t)
	ctx := ctxT(t)
	kube := s.kube.CoreV1()

	ns := must[*corev1.Namespace](t)(kube.Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-a", Labels: map[string]string{"env": "prod"},
	}}, metav1.CreateOptions{}))
	sa := must[*corev1.ServiceAccount](t)(kube.ServiceAccounts("team-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: "builder", Labels: map[string]string{"role": "ci"},
	}}, metav1.CreateOptions{}))

	t.Run("Pod", func(t *testing.T) { testPodMapping(t, s, c, ns) })
	t.Run("Profiles", func(t *testing.T) { testProfileMapping(t, s, c, ns, sa) })
	t.Run("NetworkPolicy", func(t *testing.T) { testNetworkPolicyMapping(t, s, c) })
	t.Run("Node", func(t *testing.T) { testNodeMapping(t, s, c) })
}

func pod(name, node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a", Labels: map[string]string{"app": "web"}, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:           node,
			ServiceAccountName: "builder",
			Containers: []corev1.Container{{Name: "web", Image: "nginx", Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP},
				{ContainerPort: 9090, Protocol: corev1.ProtocolTCP},
			}}},
		},
	}
}

func testPodMapping(t *testing.T, s *testServer, c *Client, ns *corev1.Namespace) {
	ctx := ctxT(t)
	pods := s.kube.CoreV1().Pods("team-a")
	ipAnnotations := map[string]string{
		annotationPodIPs:      "10.0.0.5,fd00::5",
		annotationPodIP:       "10.0.0.5",
		annotationContainerID: "abc123",
	}
	p := must[*corev1.Pod](t)(pods.Create(ctx, pod("web-1", "node-1", ipAnnotations), metav1.CreateOptions{}))
	// Not shown: host-networked, not yet scheduled, no IP yet.
	hostNet := pod("host", "node-1", ipAnnotations)
	hostNet.Spec.HostNetwork = true
	must[*corev1.Pod](t)(pods.Create(ctx, hostNet, metav1.CreateOptions{}))
	must[*corev1.Pod](t)(pods.Create(ctx, pod("pending", "", ipAnnotations), metav1.CreateOptions{}))
	noIP := must[*corev1.Pod](t)(pods.Create(ctx, pod("no-ip", "node-2", nil), metav1.CreateOptions{}))

	key := datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: "team-a", Name: "node--1-k8s-web--1-eth0"}
	got := must[v3.Resource](t)(c.Get(ctx, key)).(*v3.WorkloadEndpoint)
	want := &v3.WorkloadEndpoint{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: key.Name, Namespace: "team-a", UID: p.UID, ResourceVersion: p.ResourceVersion, CreationTimestamp: p.CreationTimestamp,
			Labels: map[string]string{
				"app":                              "web",
				"projectcalico.org/namespace":      "team-a",
				"projectcalico.org/orchestrator":   "k8s",
				"projectcalico.org/serviceaccount": "builder",
			},
		},
		Spec: v3.WorkloadEndpointSpec{
			Orchestrator:       "k8s",
			Node:               "node-1",
			Pod:                "web-1",
			ContainerID:        "abc123",
			Endpoint:           "eth0",
			ServiceAccountName: "builder",
			IPNetworks:         []string{"10.0.0.5/32", "fd00::5/128"},
			Profiles:           []string{"kns.team-a", "ksa.team-a.builder"},
			InterfaceName:      VethName("team-a", "web-1"),
			Ports:              []v3.WorkloadEndpointPort{{Name: "http", Protocol: numorstring.ProtocolFromString("tcp"), Port: 8080}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("WorkloadEndpoint (-want +got):\n%s", d)
	}
	for _, name := range []string{"node--1-k8s-host-eth0", "node--2-k8s-no--ip-eth0", "node--9-k8s-web--1-eth0", "garbage"} {
		if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: "team-a", Name: name}); !errors.Is(err, datastore.ErrNotFound) {
			t.Errorf("get %s: %v, want ErrNotFound", name, err)
		}
	}
	l := must[*datastore.List](t)(c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: "team-a", Selector: "app == 'web'"}))
	if len(l.Items) != 1 || l.Items[0].GetName() != key.Name {
		t.Fatalf("list: %v", names(l.Items))
	}
	if l := must[*datastore.List](t)(c.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: "other"})); len(l.Items) != 0 {
		t.Fatalf("list of another namespace: %v", names(l.Items))
	}

	w := must[datastore.Watcher](t)(c.Watch(ctx, v3.KindWorkloadEndpoint, datastore.WatchOptions{Namespace: "team-a", Revision: l.Revision}))
	defer w.Stop()
	// The CNI plugin writes the IP: the endpoint appears.
	noIP.Annotations = map[string]string{annotationPodIP: "10.0.0.9"}
	must[*corev1.Pod](t)(pods.Update(ctx, noIP, metav1.UpdateOptions{}))
	ev := nextEvent(t, w)
	if ev.Type != datastore.EventAdded || ev.Object.GetName() != "node--2-k8s-no--ip-eth0" {
		t.Fatalf("got %s %s, want Added node--2-k8s-no--ip-eth0", ev.Type, ev.Object.GetName())
	}
	// A label change is a Modified carrying the previous state.
	p = must[*corev1.Pod](t)(pods.Get(ctx, "web-1", metav1.GetOptions{}))
	p.Labels["version"] = "2"
	must[*corev1.Pod](t)(pods.Update(ctx, p, metav1.UpdateOptions{}))
	ev = nextEvent(t, w)
	if ev.Type != datastore.EventModified || ev.Object.GetLabels()["version"] != "2" {
		t.Fatalf("got %s %v, want Modified with label version=2", ev.Type, ev.Object.GetLabels())
	}
	// The pod finished: its endpoint is gone (it no longer owns the IP).
	p = must[*corev1.Pod](t)(pods.Get(ctx, "web-1", metav1.GetOptions{}))
	p.Status.Phase = corev1.PodSucceeded
	must[*corev1.Pod](t)(pods.UpdateStatus(ctx, p, metav1.UpdateOptions{}))
	ev = nextEvent(t, w)
	if ev.Type != datastore.EventDeleted || ev.Object.GetName() != key.Name {
		t.Fatalf("got %s %s, want Deleted %s", ev.Type, ev.Object.GetName(), key.Name)
	}
	if _, err := c.Get(ctx, key); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("finished pod still has an endpoint: %v", err)
	}
	// Deleting a pod deletes its endpoint. (With no kubelet to confirm a
	// graceful deletion, delete at once.)
	now := int64(0)
	if err := pods.Delete(ctx, "no-ip", metav1.DeleteOptions{GracePeriodSeconds: &now}); err != nil {
		t.Fatal(err)
	}
	// (The API server may first report the pod as terminating: still
	// holding its IP, so still an endpoint.)
	for ev = nextEvent(t, w); ev.Type == datastore.EventModified; ev = nextEvent(t, w) {
	}
	if ev.Type != datastore.EventDeleted || ev.Object.GetName() != "node--2-k8s-no--ip-eth0" {
		t.Fatalf("got %s %s, want Deleted node--2-k8s-no--ip-eth0", ev.Type, ev.Object.GetName())
	}

	wantReadOnly(t, c, got, "change the pod")
}

func testProfileMapping(t *testing.T, s *testServer, c *Client, ns *corev1.Namespace, sa *corev1.ServiceAccount) {
	ctx := ctxT(t)
	kns := must[v3.Resource](t)(c.Get(ctx, datastore.Key{Kind: v3.KindProfile, Name: "kns.team-a"})).(*v3.Profile)
	uid, _ := ConvertUID(ns.UID)
	want := &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "kns.team-a", UID: uid, ResourceVersion: ns.ResourceVersion, CreationTimestamp: ns.CreationTimestamp},
		Spec: v3.ProfileSpec{
			Ingress:       []v3.Rule{{Action: v3.Allow}},
			Egress:        []v3.Rule{{Action: v3.Allow}},
			LabelsToApply: map[string]string{"pcns.env": "prod", "pcns.projectcalico.org/name": "team-a", "pcns.kubernetes.io/metadata.name": "team-a"},
		},
	}
	if d := cmp.Diff(want, kns); d != "" {
		t.Fatalf("namespace profile (-want +got):\n%s", d)
	}
	ksa := must[v3.Resource](t)(c.Get(ctx, datastore.Key{Kind: v3.KindProfile, Name: "ksa.team-a.builder"})).(*v3.Profile)
	if d := cmp.Diff(map[string]string{"pcsa.role": "ci", "pcsa.projectcalico.org/name": "builder"}, ksa.Spec.LabelsToApply); d != "" {
		t.Fatalf("service account profile labels (-want +got):\n%s", d)
	}
	if ksa.Spec.Ingress != nil || ksa.Spec.Egress != nil {
		t.Fatalf("service account profile has rules: %+v", ksa.Spec)
	}
	if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindProfile, Name: "kns.nope"}); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("profile of a missing namespace: %v", err)
	}
	// As in Calico, there are no Profiles of the datastore's own (no
	// profiles CRD): one cannot be written, nor found.
	custom := &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "custom", ResourceVersion: "1"},
		Spec:       v3.ProfileSpec{LabelsToApply: map[string]string{"x": "y"}},
	}
	wantReadOnly(t, c, custom, "label those instead")
	if _, err := c.Get(ctx, datastore.KeyOf(custom)); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("get of a profile no namespace or service account makes: %v, want not found", err)
	}

	l := must[*datastore.List](t)(c.List(ctx, v3.KindProfile, datastore.ListOptions{}))
	got := names(l.Items)
	for _, want := range []string{"kns.default", "kns.kube-system", "kns.team-a", "ksa.team-a.builder", "projectcalico-default-allow"} {
		if !strings.Contains(","+got+",", ","+want+",") {
			t.Errorf("profile list %s lacks %s", got, want)
		}
	}
	if strings.Contains(","+got+",", ",custom,") {
		t.Errorf("profile list %s has the refused profile", got)
	}
	if strings.Count(l.Revision, "/") != 1 {
		t.Errorf("profile list revision %q does not combine its two sources (namespaces/serviceaccounts, as Calico's)", l.Revision)
	}

	// Relabelling the namespace is seen by a watch of profiles.
	w := must[datastore.Watcher](t)(c.Watch(ctx, v3.KindProfile, datastore.WatchOptions{Revision: l.Revision}))
	defer w.Stop()
	cur := must[*corev1.Namespace](t)(s.kube.CoreV1().Namespaces().Get(ctx, "team-a", metav1.GetOptions{}))
	cur.Labels["env"] = "staging"
	must[*corev1.Namespace](t)(s.kube.CoreV1().Namespaces().Update(ctx, cur, metav1.UpdateOptions{}))
	ev := nextEvent(t, w)
	if ev.Type != datastore.EventModified || ev.Object.GetName() != "kns.team-a" || ev.Object.(*v3.Profile).Spec.LabelsToApply["pcns.env"] != "staging" {
		t.Fatalf("got %s %s %v", ev.Type, ev.Object.GetName(), ev.Object.(*v3.Profile).Spec.LabelsToApply)
	}
	if parts := strings.Split(ev.Revision, "/"); len(parts) != 2 || parts[0] != ev.Object.GetResourceVersion() {
		t.Errorf("event revision %q does not carry the namespace's version %s", ev.Revision, ev.Object.GetResourceVersion())
	}

	wantReadOnly(t, c, kns, "change the namespace's labels")
	wantReadOnly(t, c, ksa, "change the service account's labels")
	wantReadOnly(t, c, DefaultAllowProfile(), "built in")
}

func testNetworkPolicyMapping(t *testing.T, s *testServer, c *Client) {
	ctx := ctxT(t)
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	endPort := int32(8080)
	knp := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-web", Namespace: "team-a"},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{
						PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "fe"}},
						NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}},
					},
					{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.1.0.0/16"}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{
					{Port: namedPort("http")},
					{Protocol: &tcp, Port: intPort(8000), EndPort: &endPort},
				},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &udp, Port: intPort(53)}},
			}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
	knp = must[*networkingv1.NetworkPolicy](t)(s.kube.NetworkingV1().NetworkPolicies("team-a").Create(ctx, knp, metav1.CreateOptions{}))
	// A Calico NetworkPolicy of the same namespace, stored as a CRD.
	calicoNP := &v3.NetworkPolicy{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "calico-np", Namespace: "team-a"},
		Spec:       v3.NetworkPolicySpec{Selector: "all()", Ingress: []v3.Rule{{Action: v3.Deny}}},
	}
	must[v3.Resource](t)(c.Create(ctx, calicoNP))

	key := datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: "team-a", Name: "knp.default.allow-web"}
	got := must[v3.Resource](t)(c.Get(ctx, key)).(*v3.NetworkPolicy)
	uid, _ := ConvertUID(knp.UID)
	order := 1000.0
	webPorts := []numorstring.Port{port("http"), port("8000:8080")}
	want := &v3.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: "team-a", UID: uid,
			ResourceVersion: knp.ResourceVersion, CreationTimestamp: knp.CreationTimestamp},
		Spec: v3.NetworkPolicySpec{
			Tier:     "default",
			Order:    &order,
			Selector: k8sPods + " && app == 'web'",
			Types:    []v3.PolicyType{v3.PolicyTypeIngress, v3.PolicyTypeEgress},
			Ingress: []v3.Rule{
				{Action: v3.Allow, Protocol: proto("TCP"),
					Source:      v3.EntityRule{Selector: k8sPods + " && role == 'fe'", NamespaceSelector: "team == 'x'"},
					Destination: v3.EntityRule{Ports: webPorts}},
				{Action: v3.Allow, Protocol: proto("TCP"),
					Source:      v3.EntityRule{Nets: []string{"10.0.0.0/8"}, NotNets: []string{"10.1.0.0/16"}},
					Destination: v3.EntityRule{Ports: webPorts}},
			},
			Egress: []v3.Rule{{Action: v3.Allow, Protocol: proto("UDP"),
				Destination: v3.EntityRule{Selector: k8sPods, NamespaceSelector: "all()", Ports: []numorstring.Port{port("53")}}}},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("converted policy (-want +got):\n%s", d)
	}

	l := must[*datastore.List](t)(c.List(ctx, v3.KindNetworkPolicy, datastore.ListOptions{Namespace: "team-a"}))
	if got := names(l.Items); got != "calico-np,knp.default.allow-web" {
		t.Fatalf("policies listed: %s", got)
	}
	w := must[datastore.Watcher](t)(c.Watch(ctx, v3.KindNetworkPolicy, datastore.WatchOptions{Namespace: "team-a", Revision: l.Revision}))
	defer w.Stop()
	cur := must[*networkingv1.NetworkPolicy](t)(s.kube.NetworkingV1().NetworkPolicies("team-a").Get(ctx, "allow-web", metav1.GetOptions{}))
	cur.Spec.Ingress = nil // now denies all ingress
	must[*networkingv1.NetworkPolicy](t)(s.kube.NetworkingV1().NetworkPolicies("team-a").Update(ctx, cur, metav1.UpdateOptions{}))
	ev := nextEvent(t, w)
	if ev.Type != datastore.EventModified || ev.Object.GetName() != key.Name || ev.Object.(*v3.NetworkPolicy).Spec.Ingress != nil {
		t.Fatalf("got %s %s", ev.Type, ev.Object.GetName())
	}
	must[v3.Resource](t)(c.Delete(ctx, datastore.KeyOf(calicoNP), datastore.DeleteOptions{}))
	if ev := nextEvent(t, w); ev.Type != datastore.EventDeleted || ev.Object.GetName() != "calico-np" {
		t.Fatalf("got %s %s, want Deleted calico-np", ev.Type, ev.Object.GetName())
	}

	wantReadOnly(t, c, got, "edit that (networking.k8s.io/v1) instead")
}

func testNodeMapping(t *testing.T, s *testServer, c *Client) {
	ctx := ctxT(t)
	nodes := s.kube.CoreV1().Nodes()
	kn := must[*corev1.Node](t)(nodes.Create(ctx, &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:   "node-1",
			Labels: map[string]string{"kubernetes.io/hostname": "node-1"},
			Annotations: map[string]string{
				nodeIPv4Address:         "192.168.1.10/24",
				nodeASNumber:            "64513",
				nodeIPv4IPIPTunnelAddr:  "10.244.1.1",
				nodeIPv4VXLANTunnelAddr: "10.244.1.2",
			},
		},
		Spec: corev1.NodeSpec{PodCIDR: "10.244.1.0/24", PodCIDRs: []string{"10.244.1.0/24"}},
	}, metav1.CreateOptions{}))
	kn.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.168.1.10"}}
	kn = must[*corev1.Node](t)(nodes.UpdateStatus(ctx, kn, metav1.UpdateOptions{}))

	key := datastore.Key{Kind: v3.KindNode, Name: "node-1"}
	n := must[v3.Resource](t)(c.Get(ctx, key)).(*v3.Node)
	asn := numorstring.ASNumber(64513)
	want := &v3.Node{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-1", UID: kn.UID, ResourceVersion: kn.ResourceVersion, CreationTimestamp: kn.CreationTimestamp,
			Labels:      map[string]string{"kubernetes.io/hostname": "node-1"},
			Annotations: map[string]string{nodeKubeLabels: `{"kubernetes.io/hostname":"node-1"}`},
		},
		Spec: v3.NodeSpec{
			BGP:                 &v3.NodeBGPSpec{ASNumber: &asn, IPv4Address: "192.168.1.10/24", IPv4IPIPTunnelAddr: "10.244.1.1"},
			IPv4VXLANTunnelAddr: "10.244.1.2",
			OrchRefs:            []v3.OrchRef{{NodeName: "node-1", Orchestrator: "k8s"}},
			Addresses: []v3.NodeAddress{
				{Address: "192.168.1.10/24", Type: v3.NodeAddressCalicoNodeIP},
				{Address: "192.168.1.10", Type: v3.NodeAddressInternalIP},
			},
		},
		Status: &v3.NodeStatus{PodCIDRs: []string{"10.244.1.0/24"}},
	}
	if d := cmp.Diff(want, n); d != "" {
		t.Fatalf("node (-want +got):\n%s", d)
	}
	l := must[*datastore.List](t)(c.List(ctx, v3.KindNode, datastore.ListOptions{Selector: "kubernetes.io/hostname == 'node-1'"}))
	if names(l.Items) != "node-1" {
		t.Fatalf("node list: %s", names(l.Items))
	}
	w := must[datastore.Watcher](t)(c.Watch(ctx, v3.KindNode, datastore.WatchOptions{Revision: l.Revision}))
	defer w.Stop()

	// Round trip through Update: BGP fields and a Calico label go into the
	// Kubernetes Node's annotations; its labels are untouched.
	upd := n.DeepCopy()
	newASN := numorstring.ASNumber(65000)
	upd.Spec.BGP.ASNumber = &newASN
	upd.Spec.BGP.RouteReflectorClusterID = "224.0.0.1"
	upd.Spec.IPv4VXLANTunnelAddr = ""
	upd.Labels["rack"] = "r1"
	after := must[v3.Resource](t)(c.Update(ctx, upd)).(*v3.Node)
	if after.ResourceVersion == n.ResourceVersion || *after.Spec.BGP.ASNumber != 65000 || after.Labels["rack"] != "r1" {
		t.Fatalf("update returned %+v", after)
	}
	kn = must[*corev1.Node](t)(nodes.Get(ctx, "node-1", metav1.GetOptions{}))
	for k, v := range map[string]string{
		nodeASNumber:              "65000",
		nodeRouteReflectorCluster: "224.0.0.1",
		nodeIPv4Address:           "192.168.1.10/24",
		calicoLabelsAnnotation:    `{"rack":"r1"}`,
	} {
		if kn.Annotations[k] != v {
			t.Errorf("Kubernetes node annotation %s = %q, want %q", k, kn.Annotations[k], v)
		}
	}
	if _, ok := kn.Annotations[nodeIPv4VXLANTunnelAddr]; ok {
		t.Error("cleared VXLAN address still annotated")
	}
	if d := cmp.Diff(map[string]string{"kubernetes.io/hostname": "node-1"}, kn.Labels); d != "" {
		t.Errorf("Kubernetes node labels changed (-want +got):\n%s", d)
	}
	ev := nextEvent(t, w)
	if ev.Type != datastore.EventModified || ev.Object.(*v3.Node).Spec.BGP.RouteReflectorClusterID != "224.0.0.1" {
		t.Fatalf("watch: %s %+v", ev.Type, ev.Object)
	}
	reread := must[v3.Resource](t)(c.Get(ctx, key)).(*v3.Node)
	if d := cmp.Diff(after, reread); d != "" {
		t.Errorf("re-read differs from what Update returned (-update +get):\n%s", d)
	}

	// Compare-and-swap on the Kubernetes Node's resource version.
	stale := n.DeepCopy()
	stale.Spec.BGP.IPv4Address = "192.168.1.11/24"
	if _, err := c.Update(ctx, stale); !errors.Is(err, datastore.ErrConflict) {
		t.Fatalf("stale update: %v, want ErrConflict", err)
	}
	missing := reread.DeepCopy()
	missing.Name = "node-9"
	if _, err := c.Update(ctx, missing); !errors.Is(err, datastore.ErrNotFound) {
		t.Fatalf("update of a missing node: %v, want ErrNotFound", err)
	}
	// Kubernetes owns the node's life.
	if _, err := c.Create(ctx, &v3.Node{TypeMeta: want.TypeMeta, ObjectMeta: metav1.ObjectMeta{Name: "node-2"}}); !errors.Is(err, datastore.ErrReadOnly) {
		t.Errorf("create node: %v, want ErrReadOnly", err)
	}
	if _, err := c.Delete(ctx, key, datastore.DeleteOptions{}); !errors.Is(err, datastore.ErrReadOnly) || !strings.Contains(err.Error(), "Kubernetes Node") {
		t.Errorf("delete node: %v, want ErrReadOnly naming the Kubernetes Node", err)
	}
}

func names(items []v3.Resource) string {
	var out []string
	for _, it := range items {
		out = append(out, it.GetName())
	}
	return strings.Join(out, ",")
}
