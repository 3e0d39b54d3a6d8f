//go:build privileged && integration

package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	ct "github.com/tabbynet/tabby/felix/calc/calctest"
	"github.com/tabbynet/tabby/internal/testservers"
)

// TestPrivilegedEtcdModeReadsPodFromKubernetes: in etcd mode with a
// kubeconfig and policy type k8s, the plugin reads the pod from a real
// kube-apiserver, as Calico's plugin does: the WorkloadEndpoint it writes
// to etcd carries the pod's labels (with projectcalico.org/namespace,
// orchestrator and serviceaccount), its service account, the kns./ksa.
// profiles and its named ports; the pod's ipAddrs annotation and its
// namespace's ipv4pools annotation are honoured.
// Before, the endpoint had only the namespace and orchestrator labels, so
// label-selected policy did not apply to pods in etcd mode.
func TestPrivilegedEtcdModeReadsPodFromKubernetes(t *testing.T) {
	c := newCluster(t, clusterOpts{pools: []string{"10.66.0.0/16"}})
	k := testservers.StartKubeAPIServer(t, testservers.WithAPIServerFlags("--shutdown-watch-termination-grace-period=1s"))
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	kube := kubernetes.NewForConfigOrDie(rc)
	ctx := context.Background()
	// The namespace's pool annotation applies to its pods that name no
	// pool themselves.
	c.createPool("ns-pool", "10.67.0.0/16")
	nsPatch := []byte(`{"metadata":{"annotations":{"cni.projectcalico.org/ipv4pools":"[\"ns-pool\"]"}}}`)
	if _, err := kube.CoreV1().Namespaces().Patch(ctx, "default", k8stypes.MergePatchType, nsPatch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ServiceAccounts("default").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "websa"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := []*corev1.Pod{
		{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Labels: map[string]string{"app": "web", "tier": "front"}},
			Spec: corev1.PodSpec{NodeName: "node1", ServiceAccountName: "websa", Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", Labels: map[string]string{"app": "db"},
			Annotations: map[string]string{"cni.projectcalico.org/ipAddrs": `["10.66.9.9"]`}},
			Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}},
	}
	for _, p := range pods {
		if _, err := kube.CoreV1().Pods("default").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	kubeconfig := nodeKubeconfig(t, c.node, k)
	var conf map[string]any
	if err := json.Unmarshal(c.list.Plugins[0].Bytes, &conf); err != nil {
		t.Fatal(err)
	}
	conf["policy"] = map[string]any{"type": "k8s"}
	conf["kubernetes"] = map[string]any{"kubeconfig": kubeconfig}
	conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{conf}})
	if c.list, err = libcni.ConfListFromBytes(conflist); err != nil {
		t.Fatal(err)
	}

	web, db := c.newPod("web"), c.newPod("db")
	c.mustAdd(web)
	c.mustAdd(db)
	if !strings.HasPrefix(web.ip(false), "10.67.") {
		t.Fatalf("web got %s, want an address of ns-pool (its namespace's ipv4pools annotation)", web.ip(false))
	}
	if db.ip(false) != "10.66.9.9" {
		t.Fatalf("db got %s, want 10.66.9.9 from its ipAddrs annotation", db.ip(false))
	}
	get := func(name string) *v3.WorkloadEndpoint {
		t.Helper()
		r, err := c.client.Get(ctx, datastore.Key{Kind: v3.KindWorkloadEndpoint, Namespace: "default", Name: name})
		if err != nil {
			t.Fatal(err)
		}
		return r.(*v3.WorkloadEndpoint)
	}
	w := get("node1-k8s-web-eth0")
	wantLabels := map[string]string{
		"app": "web", "tier": "front",
		"projectcalico.org/namespace": "default", "projectcalico.org/orchestrator": "k8s",
		"projectcalico.org/serviceaccount": "websa",
	}
	if !maps.Equal(w.Labels, wantLabels) {
		t.Errorf("web endpoint labels %v, want %v", w.Labels, wantLabels)
	}
	if w.Spec.ServiceAccountName != "websa" || !slices.Equal(w.Spec.Profiles, []string{"kns.default", "ksa.default.websa"}) {
		t.Errorf("web endpoint service account %q, profiles %v", w.Spec.ServiceAccountName, w.Spec.Profiles)
	}
	if len(w.Spec.Ports) != 1 || w.Spec.Ports[0].Name != "http" || w.Spec.Ports[0].Port != 8080 || w.Spec.Ports[0].Protocol.String() != "TCP" {
		t.Errorf("web endpoint ports %+v, want http TCP 8080", w.Spec.Ports)
	}
	if got := w.Spec.IPNetworks; len(got) != 1 || got[0] != web.ip(false)+"/32" {
		t.Errorf("web endpoint addresses %v, want %s/32", got, web.ip(false))
	}
	if d := get("node1-k8s-db-eth0"); d.Labels["app"] != "db" || d.Spec.IPNetworks[0] != "10.66.9.9/32" {
		t.Errorf("db endpoint: labels %v, addresses %v", d.Labels, d.Spec.IPNetworks)
	}

	// Felix on the node enforces a policy that selects the pod by a label
	// the endpoint has only because the plugin read the pod: db -> web is
	// cut, web -> db (db is not selected) stays open.
	for _, r := range []v3.Resource{
		ct.NSProfile("default", nil),
		&v3.Profile{TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "ksa.default.websa"},
			Spec:       v3.ProfileSpec{LabelsToApply: map[string]string{"pcsa.projectcalico.org/name": "websa"}}},
	} {
		if _, err := c.client.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	dp := runFelix(t, c)
	webAddr := serve(t, web.netns, net.JoinHostPort(web.ip(false), "8080"), "web")
	dbAddr := serve(t, db.netns, net.JoinHostPort(db.ip(false), "5432"), "db")
	reaches := func(from *pod, addr, want string) bool {
		got, err := dial(from.netns, addr)
		return err == nil && got == want
	}
	waitFor(t, "felix in sync with db -> web open under the namespace profile", func() bool {
		return dp.InSync() && reaches(db, webAddr, "web")
	})
	if _, err := c.client.Create(ctx, ct.NP("default", "isolate-web", nil, "app == 'web' && projectcalico.org/serviceaccount == 'websa'", ct.Ingress, nil, nil)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "db -> web denied by the label-selected policy", func() bool { return !reaches(db, webAddr, "web") })
	if !reaches(web, dbAddr, "db") {
		t.Error("web -> db denied: the policy selects web only")
	}

	// A pod the API server does not know is refused before any change.
	ghost := c.newPod("ghost")
	if err := c.add(ghost); err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("ADD of a pod Kubernetes does not have: %v, want an error naming it", err)
	}
	for _, p := range []*pod{web, db} {
		if err := c.del(p); err != nil {
			t.Fatal(err)
		}
	}
	if left := c.leftovers(); len(left) > 0 {
		t.Errorf("left after DEL: %v", left)
	}
}
