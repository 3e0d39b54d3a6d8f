//go:build integration

package kubecontrollers_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/datastore/etcd/etcdlib"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/internal/testservers"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/kubecontrollers"
	"github.com/tabbynet/tabby/kubecontrollers/config"
	"github.com/tabbynet/tabby/kubecontrollers/ipamgc"
	"github.com/tabbynet/tabby/kubecontrollers/leader"
)

// cluster is a real kube-apiserver and, for etcd mode, a Calico datastore
// in its etcd (under /calico/, as in a Calico cluster sharing etcd).
type cluster struct {
	k    *testservers.KubeAPIServer
	rc   *rest.Config
	kube kubernetes.Interface
	ds   datastore.Client
	etcd bool
}

func newCluster(t *testing.T, etcdMode bool) *cluster {
	t.Helper()
	k := testservers.StartKubeAPIServer(t)
	rc, err := clientcmd.BuildConfigFromFlags("", k.Kubeconfig())
	if err != nil {
		t.Fatal(err)
	}
	rc.QPS, rc.Burst = 1000, 1000
	c := &cluster{k: k, rc: rc, kube: kubernetes.NewForConfigOrDie(rc), etcd: etcdMode}
	if etcdMode {
		ds, err := etcd.New(etcd.Config{Endpoints: []string{k.Etcd.Endpoint()}, NewTransport: etcdlib.New})
		if err != nil {
			t.Fatal(err)
		}
		c.ds = ds
	} else {
		testservers.ApplyCRDs(t, rc, "../manifests/crds")
		ds, err := kdd.New(kdd.Config{REST: rc})
		if err != nil {
			t.Fatal(err)
		}
		c.ds = ds
	}
	t.Cleanup(func() { c.ds.Close() })
	return c
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// configure stores the KubeControllersConfiguration the test runs with.
func (c *cluster) configure(t *testing.T, grace, period time.Duration) {
	t.Helper()
	spec := v3.KubeControllersDefaults()
	spec.PrometheusMetricsPort = new(0)
	spec.Controllers.Node.LeakGracePeriod = &metav1.Duration{Duration: grace}
	spec.Controllers.Node.ReconcilerPeriod = &metav1.Duration{Duration: period}
	for _, p := range []**metav1.Duration{&spec.Controllers.Policy.ReconcilerPeriod, &spec.Controllers.Namespace.ReconcilerPeriod,
		&spec.Controllers.ServiceAccount.ReconcilerPeriod, &spec.Controllers.WorkloadEndpoint.ReconcilerPeriod} {
		*p = &metav1.Duration{Duration: period}
	}
	_, err := c.ds.Create(ctxT(t), &v3.KubeControllersConfiguration{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindKubeControllersConfiguration, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
}

// clock is the GC's clock, moved by the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// instance is one running kube-controllers.
type instance struct {
	compactions atomic.Int32
	cancel      context.CancelFunc
	done        chan struct{}
	passes      chan ipamgc.Result
	leading     chan bool
}

type runOpts struct {
	identity string
	now      func() time.Time
	env      map[string]string
	onLead   func(bool)
}

func (c *cluster) start(t *testing.T, o runOpts) *instance {
	t.Helper()
	env := map[string]string{"DATASTORE_TYPE": "kubernetes", "ENABLED_CONTROLLERS": "node"}
	if c.etcd {
		env = map[string]string{"DATASTORE_TYPE": "etcdv3", "ENABLED_CONTROLLERS": "node,policy,namespace,serviceaccount,workloadendpoint"}
	}
	for k, v := range o.env {
		env[k] = v
	}
	ctx, cancel := context.WithCancel(context.Background())
	in := &instance{cancel: cancel, done: make(chan struct{}), passes: make(chan ipamgc.Result, 1000), leading: make(chan bool, 100)}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo})).With("instance", o.identity)
	go func() {
		defer close(in.done)
		var etcdCfg *etcd.Config
		if c.etcd {
			etcdCfg = &etcd.Config{Endpoints: []string{c.k.Etcd.Endpoint()}}
		}
		err := kubecontrollers.Run(ctx, kubecontrollers.Options{
			Etcd:      etcdCfg,
			OnCompact: func(int64) { in.compactions.Add(1) },
			Env:       config.FromEnv(func(k string) string { return env[k] }),
			Kube:      c.kube, Dynamic: dynamic.NewForConfigOrDie(c.rc), Client: c.ds, Now: o.now, Logger: log,
			HealthInterval: 200 * time.Millisecond,
			Leader: leader.Config{Identity: o.identity, LeaseDuration: 3 * time.Second,
				RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond, Logger: log},
			OnGCPass: func(r ipamgc.Result, err error) {
				if err != nil {
					log.Error("GC pass", "err", err)
					return
				}
				select {
				case in.passes <- r:
				default:
				}
			},
			OnLeading: func(b bool) {
				if o.onLead != nil {
					o.onLead(b)
				}
				in.leading <- b
			},
		})
		if err != nil && ctx.Err() == nil {
			t.Errorf("kube-controllers %s: %v", o.identity, err)
		}
	}()
	t.Cleanup(in.stop)
	return in
}

func (in *instance) stop() {
	in.cancel()
	<-in.done
}

// pass waits for the next GC pass that starts after the call.
func (in *instance) pass(t *testing.T) ipamgc.Result {
	t.Helper()
drain:
	for {
		select {
		case <-in.passes: // passes that ended before the call
		default:
			break drain
		}
	}
	select {
	case <-in.passes: // may have been running already
	case <-time.After(time.Minute):
		t.Fatal("no GC pass within a minute")
	}
	select {
	case r := <-in.passes:
		return r
	case <-time.After(time.Minute):
		t.Fatal("no GC pass within a minute")
	}
	return ipamgc.Result{}
}

// eventually polls cond until it holds (a real controller converges; the
// bound only keeps a broken one from hanging the suite).
func eventually(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		ok, err := cond()
		if ok {
			return
		}
		last = err
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("never: %s (last error: %v)", what, last)
}

func (c *cluster) createNode(t *testing.T, name string) {
	t.Helper()
	if _, err := c.kube.CoreV1().Nodes().Create(ctxT(t), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if c.etcd {
		// calico-node's registration: the Calico Node, tied to its
		// Kubernetes node by an orchRef.
		_, err := c.ds.Create(ctxT(t), &v3.Node{TypeMeta: metav1.TypeMeta{Kind: v3.KindNode, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v3.NodeSpec{OrchRefs: []v3.OrchRef{{Orchestrator: "k8s", NodeName: name}}}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func (c *cluster) createPool(t *testing.T, cidr string) {
	t.Helper()
	_, err := c.ds.Create(ctxT(t), &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: "pool"}, Spec: v3.IPPoolSpec{CIDR: cidr, BlockSize: 28}})
	if err != nil {
		t.Fatal(err)
	}
}

// addPod does what kubelet and the calico CNI plugin do for a pod: the pod
// object, an address from IPAM, and the record of it (the pod's podIP
// annotation on Kubernetes, a WorkloadEndpoint on etcd).
func (c *cluster) addPod(t *testing.T, ns, name, node string, labels map[string]string) netip.Addr {
	t.Helper()
	ctx := ctxT(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "none"}}}}
	if _, err := c.kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	handle := "k8s-pod-network." + ns + "." + name
	ips, err := ipam.New(c.ds, ipam.Config{}).AutoAssign(ctx, ipam.AutoAssignArgs{Num4: 1, HandleID: handle, Hostname: node,
		Attrs: map[string]string{ipam.AttrNamespace: ns, ipam.AttrPod: name, ipam.AttrNode: node}})
	if err != nil || len(ips) != 1 {
		t.Fatalf("assigning %s/%s's address: %v %v", ns, name, ips, err)
	}
	ip := ips[0]
	if c.etcd {
		wepName, err := kdd.WorkloadEndpointName(node, name, "eth0")
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.ds.Create(ctx, &v3.WorkloadEndpoint{TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: wepName, Namespace: ns, Labels: map[string]string{
				"projectcalico.org/namespace": ns, "projectcalico.org/orchestrator": "k8s"}},
			Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: node, Pod: name, Endpoint: "eth0", ContainerID: "cid-" + name,
				InterfaceName: "cali" + name, IPNetworks: []string{ip.String() + "/32"}, Profiles: []string{"kns." + ns}}})
		if err != nil {
			t.Fatal(err)
		}
	} else {
		p, err := c.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		p.Annotations = map[string]string{"cni.projectcalico.org/podIP": ip.String() + "/32", "cni.projectcalico.org/podIPs": ip.String() + "/32",
			"cni.projectcalico.org/containerID": "cid-" + name}
		if _, err := c.kube.CoreV1().Pods(ns).Update(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return ip
}

// allocated says whether ip is still allocated in IPAM.
func (c *cluster) allocated(t *testing.T, ip netip.Addr) bool {
	t.Helper()
	al, err := ipam.New(c.ds, ipam.Config{}).ListAllocations(ctxT(t), func(a ipam.Allocated) bool { return a.IP == ip })
	if err != nil {
		t.Fatal(err)
	}
	return len(al) > 0
}

// affinities lists the nodes with block affinities.
func (c *cluster) affinities(t *testing.T) map[string]int {
	t.Helper()
	l, err := c.ds.List(ctxT(t), v3.KindBlockAffinity, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, r := range l.Items {
		out[r.(*v3.BlockAffinity).Spec.Node]++
	}
	return out
}

// blocksOf counts the blocks affine to node (node "" counts all).
func (c *cluster) blocksOf(t *testing.T, node string) int {
	t.Helper()
	l, err := c.ds.List(ctxT(t), v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range l.Items {
		b := r.(*v3.IPAMBlock)
		if node == "" || (b.Spec.Affinity != nil && *b.Spec.Affinity == ipam.AffinityValue(node)) {
			n++
		}
	}
	return n
}
