//go:build integration

package manifests

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/install"
	"github.com/tabbynet/tabby/cni-plugin/kubepods"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/datastore/kdd/clientset"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/kubecontrollers"
	kcconfig "github.com/tabbynet/tabby/kubecontrollers/config"
	"github.com/tabbynet/tabby/kubecontrollers/ipamgc"
	"github.com/tabbynet/tabby/kubecontrollers/status"
	"github.com/tabbynet/tabby/node/agent"
	"github.com/tabbynet/tabby/node/startup"
	typhadaemon "github.com/tabbynet/tabby/typha/daemon"
	"github.com/tabbynet/tabby/typha/discovery"
	"github.com/tabbynet/tabby/typha/syncclient"
)

// inSync records when a syncer has delivered its snapshot.
type inSync chan struct{}

func (s inSync) OnStatusUpdated(st datastore.SyncStatus) {
	if st == datastore.StatusInSync {
		select {
		case s <- struct{}{}:
		default:
		}
	}
}
func (inSync) OnUpdates([]datastore.Update) {}

// TestIntegrationComponentsRunWithManifestRBAC runs Tabby's own code as
// each ServiceAccount of tabby.yaml, with only the manifest's RBAC: as
// calico-node, the datastore initialisation, felix's and confd's syncer
// and a Node update; as calico-cni-plugin, an IPAM assignment, the pod's
// annotations and the release; as calico-kube-controllers, IPAM's leak
// check and kube-controllers itself (Lease, configuration, informers, a
// whole IPAM GC pass). What the SubjectAccessReview test derives by reading the code,
// this proves by running it.
func TestIntegrationComponentsRunWithManifestRBAC(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	admin := restConfig(t, k)
	testservers.ApplyCRDs(t, admin, "crds")
	rbac := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(rbac, rbacOf(t, "tabby.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, k, "apply", "-f", rbac)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(admin)
	adminDS, err := kdd.New(kdd.Config{REST: admin})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-a", Namespace: "default"},
		Spec: corev1.PodSpec{NodeName: "node-a", Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	if _, err := kube.CoreV1().Pods("default").Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default-ipv4-ippool"}, Spec: v3.IPPoolSpec{CIDR: "10.65.0.0/16"}}
	if _, err := adminDS.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}

	as := func(t *testing.T, sa string) (*kdd.Client, context.Context) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		token, _, err := install.RequestToken(ctx, kube, tabbyNS, sa, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		rc := &rest.Config{Host: k.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
		c, err := kdd.New(kdd.Config{REST: rc})
		if err != nil {
			t.Fatal(err)
		}
		return c, ctx
	}

	t.Run(nodeSA, func(t *testing.T) {
		c, ctx := as(t, nodeSA)
		// calico-node's start-up: the datastore initialisation (as on an
		// empty cluster, twice: create, then the update path).
		cfg, err := startup.Load(func(k string) string {
			return map[string]string{"NODENAME": "node-a", "CLUSTER_TYPE": "k8s,bgp", "CALICO_IPV6POOL_CIDR": "fd00:65::/64"}[k]
		}, "", true)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := startup.InitDatastore(ctx, c, cfg, "test", true, nil); err != nil {
				t.Fatalf("initialising the datastore: %v", err)
			}
		}
		if _, err := c.Get(ctx, datastore.Key{Kind: v3.KindIPPool, Name: startup.DefaultIPv6PoolName}); err != nil {
			t.Fatalf("the default IPv6 pool: %v", err)
		}
		synced := make(inSync, 1)
		sctx, scancel := context.WithCancel(ctx)
		defer scancel()
		kinds := slices.Concat(daemon.Kinds, confd.Kinds)
		go kdd.NewSyncer(c, kinds, synced).Run(sctx)
		select {
		case <-synced:
		case <-ctx.Done():
			t.Fatalf("felix's and confd's syncer never got in sync as calico-node")
		}
		r, err := c.Get(ctx, datastore.Key{Kind: v3.KindNode, Name: "node-a"})
		if err != nil {
			t.Fatal(err)
		}
		n := r.(*v3.Node)
		n.Spec.BGP = &v3.NodeBGPSpec{IPv4Address: "192.0.2.10/24"}
		if _, err := c.Update(ctx, n); err != nil {
			t.Fatalf("registering the node's BGP address: %v", err)
		}
		// The NetworkUnavailable condition cleared.
		kube, err := clientset.For(c)
		if err != nil {
			t.Fatal(err)
		}
		if err := agent.MarkNetworkAvailable(ctx, kube, "node-a", time.Now()); err != nil {
			t.Fatalf("clearing NetworkUnavailable: %v", err)
		}
		// The node's CalicoNodeStatus, reported.
		st := &v3.CalicoNodeStatus{TypeMeta: metav1.TypeMeta{Kind: v3.KindCalicoNodeStatus, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: "node-a-status"}, Spec: v3.CalicoNodeStatusSpec{Node: "node-a",
				Classes: []v3.NodeStatusClassType{v3.NodeStatusClassTypeAgent}, UpdatePeriodSeconds: new(uint32)}}
		if _, err := adminDS.Create(ctx, st); err != nil {
			t.Fatal(err)
		}
		r, err = c.Get(ctx, datastore.Key{Kind: v3.KindCalicoNodeStatus, Name: "node-a-status"})
		if err != nil {
			t.Fatal(err)
		}
		st = r.(*v3.CalicoNodeStatus)
		st.Status.Agent.BIRDV4.State = v3.BGPDaemonStateReady
		st.Status.LastUpdated = metav1.Now()
		if _, err := c.Update(ctx, st); err != nil {
			t.Fatalf("reporting the node's status: %v", err)
		}
		// Tunnel addresses from IPAM.
		if _, err := ipam.New(c, ipam.Config{}).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: "ipip-tunnel-addr-node-a", Hostname: "node-a", Use: v3.IPPoolAllowedUseTunnel}); err != nil {
			t.Fatalf("assigning the tunnel address: %v", err)
		}
	})

	t.Run(typhaSA, func(t *testing.T) {
		c, ctx := as(t, typhaSA)
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		tctx, tcancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			done <- typhadaemon.Run(tctx, typhadaemon.Options{Client: c, Listener: l, Log: slog.New(slog.DiscardHandler)})
		}()
		defer func() { tcancel(); <-done }()
		// Typha's streams in sync as calico-typha: clients get InSync.
		for st := range typhadaemon.Streams(c) {
			synced := make(inSync, 1)
			cl := syncclient.New(syncclient.Config{SyncerType: st, Log: slog.New(slog.DiscardHandler),
				Addrs: func(context.Context) ([]string, error) { return []string{l.Addr().String()}, nil }}, synced)
			cctx, ccancel := context.WithCancel(ctx)
			go cl.Run(cctx)
			select {
			case <-synced:
			case <-ctx.Done():
				t.Fatalf("Typha's %s stream never got in sync as calico-typha", st)
			}
			ccancel()
		}
		// calico-node finds Typha through the Service's EndpointSlices.
		node, _ := as(t, nodeSA)
		nodeKube, err := clientset.For(node)
		if err != nil {
			t.Fatal(err)
		}
		addrs, err := discovery.Settings{K8sServiceName: "calico-typha"}.Addrs(nodeKube)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := addrs(ctx); err == nil || strings.Contains(err.Error(), "forbidden") {
			t.Errorf("calico-node looking up calico-typha: %v (want: no ready endpoint)", err)
		}
	})

	t.Run(cniSA, func(t *testing.T) {
		c, ctx := as(t, cniSA)
		handle := "k8s-pod-network.cid1"
		ips, err := ipam.New(c, ipam.Config{}).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Hostname: "node-a",
			Attrs: map[string]string{"namespace": "default", "pod": "pod-a", "node": "node-a"}})
		if err != nil || len(ips) != 1 {
			t.Fatalf("assigning the pod's address: %v %v", ips, err)
		}
		pods, ok := kubepods.For(c)
		if !ok {
			t.Fatal("no pod store on a kdd client")
		}
		if _, err := pods.Request(ctx, "default", "pod-a"); err != nil {
			t.Fatalf("reading the pod: %v", err)
		}
		addr := net.IPNet{IP: net.IP(ips[0].AsSlice()), Mask: net.CIDRMask(32, 32)}
		if err := pods.Annotate(ctx, "default", "pod-a", "cid1", []net.IPNet{addr}); err != nil {
			t.Fatalf("annotating the pod: %v", err)
		}
		got, err := kube.CoreV1().Pods("default").Get(ctx, "pod-a", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations["cni.projectcalico.org/podIP"] != addr.String() {
			t.Errorf("pod annotations %v", got.Annotations)
		}
		if err := pods.Release(ctx, "default", "pod-a", "cid1"); err != nil {
			t.Fatalf("blanking the pod's annotations: %v", err)
		}
		if _, err := ipam.New(c, ipam.Config{}).ReleaseByHandle(ctx, handle); err != nil {
			t.Fatalf("releasing the address: %v", err)
		}
	})

	t.Run(kcSA, func(t *testing.T) {
		c, ctx := as(t, kcSA)
		if _, err := ipam.New(c, ipam.Config{}).CheckLeaks(ctx, time.Minute); err != nil {
			t.Fatalf("IPAM leak check: %v", err)
		}
		// kube-controllers itself, as the manifest runs it: the Lease,
		// its configuration (created, status written), the node informer
		// and a whole IPAM GC pass.
		token, _, err := install.RequestToken(ctx, kube, tabbyNS, kcSA, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		kc := kubernetes.NewForConfigOrDie(&rest.Config{Host: k.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
		rctx, stop := context.WithCancel(ctx)
		defer stop()
		passed := make(chan error, 10)
		done := make(chan error, 1)
		st := status.New("")
		go func() {
			done <- kubecontrollers.Run(rctx, kubecontrollers.Options{
				Env: kcconfig.FromEnv(func(k string) string {
					return map[string]string{"DATASTORE_TYPE": "kubernetes", "ENABLED_CONTROLLERS": "node"}[k]
				}),
				Kube: kc, Client: c, Status: st, HealthInterval: 200 * time.Millisecond,
				OnGCPass: func(_ ipamgc.Result, err error) {
					select {
					case passed <- err:
					default:
					}
				},
			})
		}()
		select {
		case err := <-passed:
			if err != nil {
				t.Fatalf("kube-controllers' IPAM GC pass as %s: %v", kcSA, err)
			}
		case err := <-done:
			t.Fatalf("kube-controllers stopped as %s: %v", kcSA, err)
		case <-ctx.Done():
			t.Fatalf("kube-controllers never completed a GC pass as %s", kcSA)
		}
		r, err := c.Get(ctx, datastore.Key{Kind: v3.KindKubeControllersConfiguration, Name: "default"})
		if err != nil {
			t.Fatal(err)
		}
		if r.(*v3.KubeControllersConfiguration).Status.RunningConfig == nil {
			t.Errorf("kube-controllers did not record its running configuration")
		}
		// Its health checks (a datastore read, the API server's /healthz)
		// pass with these rights too.
		for !st.Ready() {
			select {
			case <-ctx.Done():
				t.Fatalf("kube-controllers never ready as %s: %s", kcSA, st.NotReady())
			case <-time.After(100 * time.Millisecond):
			}
		}
		stop()
		<-done
	})
}

// TestIntegrationKubeControllersRunWithEtcdManifestRBAC runs
// kube-controllers in etcd mode as calico-kube-controllers with only
// tabby-etcd.yaml's RBAC: the Lease, every informer (nodes, pods,
// namespaces, service accounts, NetworkPolicies) and a GC pass work, and
// the namespaces reach etcd as profiles.
func TestIntegrationKubeControllersRunWithEtcdManifestRBAC(t *testing.T) {
	k := testservers.StartKubeAPIServer(t)
	admin := restConfig(t, k)
	rbac := filepath.Join(t.TempDir(), "rbac.yaml")
	if err := os.WriteFile(rbac, rbacOf(t, "tabby-etcd.yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, k, "apply", "-f", rbac)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	kube := kubernetes.NewForConfigOrDie(admin)
	token, _, err := install.RequestToken(ctx, kube, tabbyNS, kcSA, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kc := kubernetes.NewForConfigOrDie(&rest.Config{Host: k.URL(), BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	ds, err := etcd.New(etcd.Config{Endpoints: []string{k.Etcd.Endpoint()}, NewTransport: etcdlib.New})
	if err != nil {
		t.Fatal(err)
	}
	defer ds.Close()
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	passed := make(chan error, 10)
	done := make(chan error, 1)
	go func() {
		done <- kubecontrollers.Run(rctx, kubecontrollers.Options{
			Env:  kcconfig.FromEnv(func(k string) string { return map[string]string{"DATASTORE_TYPE": "etcdv3"}[k] }),
			Kube: kc, Client: ds,
			OnGCPass: func(_ ipamgc.Result, err error) {
				select {
				case passed <- err:
				default:
				}
			},
		})
	}()
	select {
	case err := <-passed:
		if err != nil {
			t.Fatalf("IPAM GC pass as %s: %v", kcSA, err)
		}
	case err := <-done:
		t.Fatalf("kube-controllers stopped as %s: %v", kcSA, err)
	case <-ctx.Done():
		t.Fatalf("kube-controllers never completed a GC pass as %s", kcSA)
	}
	for {
		if _, err := ds.Get(ctx, datastore.Key{Kind: v3.KindProfile, Name: "kns.default"}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal("namespace default never reached etcd as profile kns.default")
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	<-done
}
