package kdd

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
)

func TestWorkloadEndpointName(t *testing.T) {
	cases := []struct {
		node, pod, want string
	}{
		{"node1", "nginx", "node1-k8s-nginx-eth0"},
		{"node-1", "web-1", "node--1-k8s-web--1-eth0"},
		{"ip-10-0-0-1.ec2.internal", "a-b-c", "ip--10--0--0--1.ec2.internal-k8s-a--b--c-eth0"},
		{"k8s", "k8s", "k8s-k8s-k8s-eth0"},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			got, err := WorkloadEndpointName(tc.node, tc.pod, "eth0")
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			node, pod, ep, ok := ParseWorkloadEndpointName(got)
			if !ok || node != tc.node || pod != tc.pod || ep != "eth0" {
				t.Fatalf("parse(%q) = %q %q %q %v", got, node, pod, ep, ok)
			}
		})
	}
	for _, bad := range [][2]string{{"", "p"}, {"-n", "p"}, {"n", "p-"}} {
		if _, err := WorkloadEndpointName(bad[0], bad[1], "eth0"); err == nil {
			t.Errorf("WorkloadEndpointName(%q, %q) succeeded", bad[0], bad[1])
		}
	}
	for _, name := range []string{"node1-cni-abc-eth0", "node1-k8s-pod", "plain", "a-k8s-b-c-d"} {
		if _, _, _, ok := ParseWorkloadEndpointName(name); ok {
			t.Errorf("ParseWorkloadEndpointName(%q) accepted a non-k8s name", name)
		}
	}
}

func TestVethName(t *testing.T) {
	// Values from sha1 computed independently of this code.
	if got := VethName("team-a", "web-1"); got != "cali8bb84fc42a3" {
		t.Errorf("got %s", got)
	}
	if got := VethName("default", "nginx"); got != "calic440f455693" {
		t.Errorf("got %s", got)
	}
}

func TestConvertUID(t *testing.T) {
	in := types.UID("30316d8a-39c5-4c5b-8b0f-1b2d6c7e9f01")
	out, err := ConvertUID(in)
	if err != nil {
		t.Fatal(err)
	}
	if out == in {
		t.Fatal("UID unchanged")
	}
	// Version (4) and variant (8..b) nibbles are kept.
	if out[14] != '4' || !strings.ContainsRune("89ab", rune(out[19])) {
		t.Errorf("version/variant not kept: %s", out)
	}
	back, err := ConvertUID(out)
	if err != nil || back != in {
		t.Fatalf("not an involution: %s -> %s -> %s (%v)", in, out, back, err)
	}
	if _, err := ConvertUID("not-a-uid"); err == nil {
		t.Error("accepted a non-UUID")
	}
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "web-1", Namespace: "team-a", UID: "pod-uid", ResourceVersion: "42", GenerateName: "web-",
			Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{
				annotationPodIPs:                "10.0.0.5,fd00::5",
				annotationPodIP:                 "10.0.0.5",
				annotationContainerID:           "abc123",
				annotationFloatingIPs:           `["172.16.0.1","2001:db8::1"]`,
				annotationAllowedSourcePrefixes: `["192.168.7.9/24"]`,
			},
		},
		Spec: corev1.PodSpec{
			NodeName:           "node-1",
			ServiceAccountName: "builder",
			InitContainers: []corev1.Container{{Name: "init", Ports: []corev1.ContainerPort{
				{Name: "metrics", ContainerPort: 9100, Protocol: corev1.ProtocolSCTP},
			}}},
			Containers: []corev1.Container{{Name: "web", Ports: []corev1.ContainerPort{
				{Name: "http", ContainerPort: 8080},
				{ContainerPort: 9090}, // unnamed, no host port: skipped
				{ContainerPort: 53, HostPort: 5353, HostIP: "10.9.9.9", Protocol: corev1.ProtocolUDP}, // host port without name
			}}},
		},
	}
}

func TestPodToWorkloadEndpoint(t *testing.T) {
	wep, visible, err := PodToWorkloadEndpoint(testPod())
	if err != nil || !visible {
		t.Fatalf("visible %v, err %v", visible, err)
	}
	want := &v3.WorkloadEndpoint{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: "node--1-k8s-web--1-eth0", Namespace: "team-a", UID: "pod-uid", ResourceVersion: "42", GenerateName: "web-",
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
			IPNATs: []v3.IPNAT{
				{InternalIP: "10.0.0.5", ExternalIP: "172.16.0.1"},
				{InternalIP: "fd00::5", ExternalIP: "2001:db8::1"},
			},
			Profiles:      []string{"kns.team-a", "ksa.team-a.builder"},
			InterfaceName: "cali8bb84fc42a3",
			Ports: []v3.WorkloadEndpointPort{
				{Name: "http", Protocol: numorstring.ProtocolFromString("tcp"), Port: 8080},
				{Protocol: numorstring.ProtocolFromString("udp"), Port: 53, HostPort: 5353, HostIP: "10.9.9.9"},
				{Name: "metrics", Protocol: numorstring.ProtocolFromString("sctp"), Port: 9100},
			},
			AllowSpoofedSourcePrefixes: []string{"192.168.7.0/24"},
		},
	}
	if d := cmp.Diff(want, wep); d != "" {
		t.Fatalf("WorkloadEndpoint (-want +got):\n%s", d)
	}
	if errs := wep.Validate(); len(errs) > 0 {
		t.Fatalf("converted endpoint does not validate: %v", errs)
	}
}

func TestPodIPsAndVisibility(t *testing.T) {
	deleting := metav1.Now()
	cases := []struct {
		name    string
		edit    func(*corev1.Pod)
		exists  bool // a WorkloadEndpoint can be named
		visible bool
		ips     []string
	}{
		{"annotations", func(*corev1.Pod) {}, true, true, []string{"10.0.0.5/32", "fd00::5/128"}},
		{"singular annotation", func(p *corev1.Pod) { delete(p.Annotations, annotationPodIPs) }, true, true, []string{"10.0.0.5/32"}},
		{"status wins, as in Calico", func(p *corev1.Pod) {
			p.Status.PodIPs = []corev1.PodIP{{IP: "10.0.0.7"}}
			p.Status.PodIP = "10.0.0.7"
		}, true, true, []string{"10.0.0.7/32"}},
		{"status podIP only", func(p *corev1.Pod) {
			p.Annotations = nil
			p.Status.PodIP = "10.0.0.8"
		}, true, true, []string{"10.0.0.8/32"}},
		{"AWS annotation", func(p *corev1.Pod) {
			p.Annotations = map[string]string{annotationAWSPodIPs: "10.2.0.1"}
		}, true, true, []string{"10.2.0.1/32"}},
		{"no IP yet", func(p *corev1.Pod) { p.Annotations = nil }, true, false, nil},
		{"succeeded", func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }, true, false, nil},
		{"failed", func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, true, false, nil},
		{"deleting, IP released by CNI", func(p *corev1.Pod) {
			p.DeletionTimestamp = &deleting
			p.Annotations[annotationPodIP] = ""
		}, true, false, nil},
		{"deleting, IP still held", func(p *corev1.Pod) { p.DeletionTimestamp = &deleting }, true, true, []string{"10.0.0.5/32", "fd00::5/128"}},
		{"host network", func(p *corev1.Pod) { p.Spec.HostNetwork = true }, false, false, nil},
		{"not scheduled", func(p *corev1.Pod) { p.Spec.NodeName = "" }, false, false, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod()
			delete(pod.Annotations, annotationFloatingIPs)
			tc.edit(pod)
			wep, visible, err := PodToWorkloadEndpoint(pod)
			if err != nil {
				t.Fatal(err)
			}
			if (wep != nil) != tc.exists || visible != tc.visible {
				t.Fatalf("exists %v visible %v, want %v %v", wep != nil, visible, tc.exists, tc.visible)
			}
			if wep != nil {
				if d := cmp.Diff(tc.ips, wep.Spec.IPNetworks); d != "" {
					t.Fatalf("ipNetworks (-want +got):\n%s", d)
				}
			}
		})
	}
	bad := testPod()
	bad.Annotations[annotationPodIPs] = "10.0.0.5,nonsense"
	if _, _, err := PodToWorkloadEndpoint(bad); err == nil || !strings.Contains(err.Error(), "nonsense") {
		t.Fatalf("bad IP annotation: %v", err)
	}
}

func TestNamespaceAndServiceAccountProfiles(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "team-a", UID: "30316d8a-39c5-4c5b-8b0f-1b2d6c7e9f01", ResourceVersion: "7",
		Labels: map[string]string{"env": "prod"},
	}}
	p, err := NamespaceToProfile(ns)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := ConvertUID(ns.UID)
	want := &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "kns.team-a", UID: uid, ResourceVersion: "7"},
		Spec: v3.ProfileSpec{
			Ingress: []v3.Rule{{Action: v3.Allow}},
			Egress:  []v3.Rule{{Action: v3.Allow}},
			LabelsToApply: map[string]string{
				"pcns.env":                    "prod",
				"pcns.projectcalico.org/name": "team-a",
			},
		},
	}
	if d := cmp.Diff(want, p); d != "" {
		t.Fatalf("namespace profile (-want +got):\n%s", d)
	}

	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: "builder", Namespace: "team-a", ResourceVersion: "8", Labels: map[string]string{"role": "ci"},
	}}
	p, err = ServiceAccountToProfile(sa)
	if err != nil {
		t.Fatal(err)
	}
	want = &v3.Profile{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "ksa.team-a.builder", ResourceVersion: "8"},
		Spec: v3.ProfileSpec{LabelsToApply: map[string]string{
			"pcsa.role":                   "ci",
			"pcsa.projectcalico.org/name": "builder",
		}},
	}
	if d := cmp.Diff(want, p); d != "" {
		t.Fatalf("service account profile (-want +got):\n%s", d)
	}
	if ns, sa, ok := profileNameToServiceAccount("ksa.team-a.my.sa"); !ok || ns != "team-a" || sa != "my.sa" {
		t.Errorf("profileNameToServiceAccount: %q %q %v", ns, sa, ok)
	}
	if d := DefaultAllowProfile(); d.Name != "projectcalico-default-allow" || len(d.Spec.Ingress) != 1 || d.Spec.Egress[0].Action != v3.Allow {
		t.Errorf("default-allow profile: %+v", d)
	}
}

func TestNodeConversionRoundTrip(t *testing.T) {
	kn := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-1", ResourceVersion: "9", UID: "node-uid",
			Labels: map[string]string{"kubernetes.io/hostname": "node-1"},
			Annotations: map[string]string{
				nodeIPv4Address:         "192.168.1.10/24",
				nodeIPv6Address:         "not-an-ip", // ignored, as Calico does
				nodeASNumber:            "64513",
				nodeIPv4IPIPTunnelAddr:  "10.244.1.1",
				nodeIPv4VXLANTunnelAddr: "10.244.1.2",
				nodeVXLANTunnelMACAddr:  "66:55:44:33:22:11",
				nodeWireguardPublicKey:  "k1",
				calicoLabelsAnnotation:  `{"rack":"r1","kubernetes.io/hostname":"shadowed"}`,
				"unrelated":             "kept",
			},
		},
		Spec: corev1.NodeSpec{PodCIDRs: []string{"10.244.1.0/24"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.168.1.10"},
			{Type: corev1.NodeHostName, Address: "node-1"},
			{Type: corev1.NodeExternalIP, Address: "203.0.113.10"},
		}},
	}
	n, err := K8sNodeToCalico(kn)
	if err != nil {
		t.Fatal(err)
	}
	asn := numorstring.ASNumber(64513)
	want := &v3.Node{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: "node-1", ResourceVersion: "9", UID: "node-uid",
			Labels:      map[string]string{"rack": "r1", "kubernetes.io/hostname": "node-1"},
			Annotations: map[string]string{nodeKubeLabels: `{"kubernetes.io/hostname":"node-1"}`},
		},
		Spec: v3.NodeSpec{
			BGP:                 &v3.NodeBGPSpec{ASNumber: &asn, IPv4Address: "192.168.1.10/24", IPv4IPIPTunnelAddr: "10.244.1.1"},
			IPv4VXLANTunnelAddr: "10.244.1.2",
			VXLANTunnelMACAddr:  "66:55:44:33:22:11",
			OrchRefs:            []v3.OrchRef{{NodeName: "node-1", Orchestrator: "k8s"}},
			Addresses: []v3.NodeAddress{
				{Address: "192.168.1.10/24", Type: v3.NodeAddressCalicoNodeIP},
				{Address: "192.168.1.10", Type: v3.NodeAddressInternalIP},
				{Address: "203.0.113.10", Type: v3.NodeAddressExternalIP},
			},
		},
		Status: &v3.NodeStatus{WireguardPublicKey: "k1", PodCIDRs: []string{"10.244.1.0/24"}},
	}
	if d := cmp.Diff(want, n); d != "" {
		t.Fatalf("node (-want +got):\n%s", d)
	}

	// Write back a change: new AS number and route reflector ID, a new
	// Calico label, no more VXLAN; Kubernetes labels stay untouched.
	newASN := numorstring.ASNumber(65000)
	n.Spec.BGP.ASNumber = &newASN
	n.Spec.BGP.RouteReflectorClusterID = "224.0.0.1"
	n.Spec.IPv4VXLANTunnelAddr, n.Spec.VXLANTunnelMACAddr = "", ""
	n.Labels["zone"] = "z1"
	out, err := MergeCalicoNodeIntoK8sNode(n, kn)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(kn.Labels, out.Labels); d != "" {
		t.Errorf("Kubernetes labels changed (-before +after):\n%s", d)
	}
	wantAnn := map[string]string{
		nodeIPv4Address:           "192.168.1.10/24",
		nodeASNumber:              "65000",
		nodeRouteReflectorCluster: "224.0.0.1",
		nodeIPv4IPIPTunnelAddr:    "10.244.1.1",
		nodeWireguardPublicKey:    "k1",
		calicoLabelsAnnotation:    `{"rack":"r1","zone":"z1"}`,
		"unrelated":               "kept",
	}
	if d := cmp.Diff(wantAnn, out.Annotations); d != "" {
		t.Errorf("annotations written back (-want +got):\n%s", d)
	}
	if kn.Annotations[nodeASNumber] != "64513" {
		t.Error("MergeCalicoNodeIntoK8sNode modified its input")
	}
	again, err := K8sNodeToCalico(out)
	if err != nil {
		t.Fatal(err)
	}
	if *again.Spec.BGP.ASNumber != 65000 || again.Labels["zone"] != "z1" || again.Spec.IPv4VXLANTunnelAddr != "" {
		t.Errorf("round trip lost the change: %+v", again)
	}
}

func TestCRDMetadataLayout(t *testing.T) {
	info, _ := v3.LookupKind(v3.KindNetworkPolicy)
	order := 10.0
	np := &v3.NetworkPolicy{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{
			Name: "allow-dns", Namespace: "team-a", ResourceVersion: "5", UID: "30316d8a-39c5-4c5b-8b0f-1b2d6c7e9f01",
			Labels:      map[string]string{"app": "dns", "projectcalico.org/tier": "default"},
			Annotations: map[string]string{"note": "x"},
		},
		Spec: v3.NetworkPolicySpec{Tier: "default", Order: &order, Selector: "all()"},
	}
	u, err := toCR(np)
	if err != nil {
		t.Fatal(err)
	}
	if u.GetAPIVersion() != "crd.projectcalico.org/v1" || u.GetKind() != "NetworkPolicy" {
		t.Errorf("CR type %s %s", u.GetAPIVersion(), u.GetKind())
	}
	// Calico v3.30 and later name a policy's CR as the policy, any tier.
	if u.GetName() != "allow-dns" || u.GetNamespace() != "team-a" || u.GetResourceVersion() != "5" {
		t.Errorf("CR identity %s/%s rv %s", u.GetNamespace(), u.GetName(), u.GetResourceVersion())
	}
	if d := cmp.Diff(map[string]string{"projectcalico.org/tier": "default"}, u.GetLabels()); d != "" {
		t.Errorf("only Calico's labels belong on the CR (-want +got):\n%s", d)
	}
	if want, _ := ConvertUID(np.UID); u.GetUID() != want {
		t.Errorf("CR UID %s, want %s", u.GetUID(), want)
	}
	meta := u.GetAnnotations()[metadataAnnotation]
	for _, want := range []string{`"name":"allow-dns"`, `"app":"dns"`, `"note":"x"`} {
		if !strings.Contains(meta, want) {
			t.Errorf("metadata annotation %s lacks %s", meta, want)
		}
	}
	if strings.Contains(meta, "creationTimestamp") {
		t.Errorf("metadata annotation holds an unset creation timestamp: %s", meta)
	}
	back, err := fromCR(info, u)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(np, back); d != "" {
		t.Fatalf("round trip (-want +got):\n%s", d)
	}

	// A CR without the annotation (written by hand or by an old Calico,
	// which named default-tier policies "default.<name>").
	u.SetAnnotations(nil)
	u.SetName("default.allow-dns")
	u.SetLabels(map[string]string{"app": "dns"})
	plain, err := fromCR(info, u)
	if err != nil {
		t.Fatal(err)
	}
	if plain.GetName() != "allow-dns" || plain.GetLabels()["app"] != "dns" {
		t.Errorf("plain CR read as %s %v", plain.GetName(), plain.GetLabels())
	}
}
