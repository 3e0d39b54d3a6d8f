//go:build privileged && integration

package e2e

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
)

// proxyInto makes addr (a loopback TCP server of the test's own namespace)
// reachable from inside n at the returned address: the listener lives in
// n, the dials happen outside it. No interface or route is added anywhere.
func proxyInto(t testing.TB, n ns.NetNS, addr string) string {
	var ln net.Listener
	if err := n.Do(func(ns.NetNS) error {
		var err error
		ln, err = net.Listen("tcp", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", addr)
				if err != nil {
					return
				}
				defer out.Close()
				go io.Copy(out, in)
				io.Copy(in, out)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestPrivilegedKubernetesDatastore: with datastore_type kubernetes the
// plugin takes addresses from calico-ipam on CRDs, honours the pod's
// ipAddrs annotation, writes Calico's pod annotations (from which the
// Kubernetes datastore derives the WorkloadEndpoint), and DEL blanks them
// and releases everything.
func TestPrivilegedKubernetesDatastore(t *testing.T) {
	node := netnstest.NewNode(t)
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
	if _, err := client.Create(ctx, &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: "k8s-pool"}, Spec: v3.IPPoolSpec{CIDR: "10.253.0.0/16"}}); err != nil {
		t.Fatal(err)
	}
	for name, ann := range map[string]map[string]string{
		"web":   nil,
		"stale": nil,
		"db":    {"cni.projectcalico.org/ipAddrs": `["10.253.7.7"]`},
	} {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Annotations: ann},
			Spec: corev1.PodSpec{NodeName: "node1", Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	kubeconfig := nodeKubeconfig(t, node, k)
	conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{map[string]any{
		"type": "calico", "datastore_type": "kubernetes", "kubernetes": map[string]any{"kubeconfig": kubeconfig},
		"nodename": "node1", "ipam": map[string]any{"type": "calico-ipam"}, "policy": map[string]any{"type": "k8s"},
	}}})
	list, err := libcni.ConfListFromBytes(conflist)
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("TABBY_CNI_HINT_DIR", t.TempDir())
	c := &cluster{t: t, node: node, cni: libcni.NewCNIConfigWithCacheDir([]string{cniBinDir(t)}, t.TempDir(), nil), list: list}

	web, db := c.newPod("web"), c.newPod("db")
	c.mustAdd(web)
	c.mustAdd(db)
	if db.ip(false) != "10.253.7.7" {
		t.Fatalf("db got %s, want 10.253.7.7 from its ipAddrs annotation", db.ip(false))
	}
	for _, p := range []*pod{web, db} {
		name := p.rt.Args[2][1]
		got, err := kube.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations["cni.projectcalico.org/podIP"] != p.ip(false)+"/32" || got.Annotations["cni.projectcalico.org/containerID"] != p.rt.ContainerID {
			t.Fatalf("pod %s annotations: %v", name, got.Annotations)
		}
		weps, err := client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: "default"})
		if err != nil {
			t.Fatal(err)
		}
		found := false
		for _, w := range weps.Items {
			s := w.(*v3.WorkloadEndpoint).Spec
			if s.Pod == name && len(s.IPNetworks) == 1 && s.IPNetworks[0] == p.ip(false)+"/32" {
				found = true
			}
		}
		if !found {
			t.Fatalf("no WorkloadEndpoint derived for pod %s: %v", name, weps.Items)
		}
	}
	// A second interface cannot be described by the pod's annotations:
	// refused before any change, and eth0's annotations stay. A repeated
	// ADD answers with the same address (issue 19, items 6 and 7).
	net1 := &pod{netns: web.netns, rt: &libcni.RuntimeConf{ContainerID: web.rt.ContainerID, NetNS: web.rt.NetNS, IfName: "net1", Args: web.rt.Args}}
	if code, msg := cniCode(c.add(net1)); code != 4 || !strings.Contains(msg, "net1") {
		t.Fatalf("ADD net1 with the Kubernetes datastore: code %d %q, want 4", code, msg)
	}
	again := &pod{netns: web.netns, rt: web.rt}
	c.mustAdd(again)
	if again.ip(false) != web.ip(false) {
		t.Fatalf("repeated ADD of web: %s, first %s", again.ip(false), web.ip(false))
	}
	if got, _ := kube.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{}); got.Annotations["cni.projectcalico.org/podIP"] != web.ip(false)+"/32" {
		t.Fatalf("web's annotations after net1 and a repeated ADD: %v", got.Annotations)
	}
	// GC with valid attachments that omit a pod removes that pod's
	// attachment whole: veth, annotations, addresses (issue 19, item 4).
	stale := c.newPod("stale")
	c.mustAdd(stale)
	gcConf, _ := json.Marshal(map[string]any{
		"cniVersion": "1.1.0", "name": "k8s-pod-network", "type": "calico", "datastore_type": "kubernetes",
		"kubernetes": map[string]any{"kubeconfig": kubeconfig}, "nodename": "node1", "ipam": map[string]any{"type": "calico-ipam"},
		"cni.dev/valid-attachments": []map[string]string{{"containerID": web.rt.ContainerID, "ifname": "eth0"}, {"containerID": db.rt.ContainerID, "ifname": "eth0"}},
	})
	if o := c.run(t, invocation{command: "GC", conf: string(gcConf)}); o.code != 0 {
		t.Fatalf("GC: code %d %s", o.code, o.msg)
	}
	if got, _ := kube.CoreV1().Pods("default").Get(ctx, "stale", metav1.GetOptions{}); got.Annotations["cni.projectcalico.org/podIP"] != "" {
		t.Fatalf("GC left the stale pod's annotations: %v", got.Annotations)
	}
	if v := c.hostVeths(t); len(v) != 2 {
		t.Fatalf("host veths after GC: %v, want web's and db's", v)
	}
	if got, err := client.Get(ctx, datastore.Key{Kind: v3.KindIPAMHandle, Name: ipam.HandleName("k8s-pod-network." + stale.rt.ContainerID)}); err == nil && len(got.(*v3.IPAMHandle).Spec.Block) > 0 {
		t.Fatalf("GC kept the stale pod's addresses: %v", got)
	}
	addr := serve(t, db.netns, net.JoinHostPort(db.ip(false), "5432"), "db")
	if got, err := dial(web.netns, addr); err != nil || got != "db" {
		t.Fatalf("web -> db: %q %v", got, err)
	}

	for _, p := range []*pod{web, db} {
		if err := c.del(p); err != nil {
			t.Fatal(err)
		}
		if err := c.del(p); err != nil {
			t.Fatalf("second DEL: %v", err)
		}
	}
	got, _ := kube.CoreV1().Pods("default").Get(ctx, "web", metav1.GetOptions{})
	if got.Annotations["cni.projectcalico.org/podIP"] != "" {
		t.Fatalf("DEL did not blank the podIP annotation: %v", got.Annotations)
	}
	handles, err := client.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range handles.Items {
		if len(h.(*v3.IPAMHandle).Spec.Block) > 0 {
			t.Errorf("allocation left: %s", h.GetName())
		}
	}
	var links []byte
	node.Do(func(ns.NetNS) error {
		l, _ := net.Interfaces()
		for _, i := range l {
			if strings.HasPrefix(i.Name, "cali") {
				links = append(links, i.Name...)
			}
		}
		return nil
	})
	if len(links) > 0 {
		t.Errorf("links left: %s", links)
	}
}
