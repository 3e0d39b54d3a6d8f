// Command demo shows what works end to end today, on this machine, without
// touching the host's own network (run it as root):
//
//	go run ./hack/demo
//
// It starts a real etcd on a unix socket, creates an IPPool through the
// datastore client, builds the `calico` CNI plugin, makes a node network
// namespace and two pod namespaces, and wires the pods through libcni
// exactly as containerd would; then it proves pod-to-pod and node-to-pod
// TCP, shows the WorkloadEndpoints and IPAM blocks Tabby recorded; starts
// felix for the node namespace and shows a GlobalNetworkPolicy cutting and
// then re-opening real traffic; deletes the pods and checks nothing is left.
// Everything it made is removed on exit.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/testutils"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/netnstest"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo failed:", err)
		os.Exit(1)
	}
}

var cleanups []func()

func cleanup() {
	for i := len(cleanups) - 1; i >= 0; i-- {
		cleanups[i]()
	}
}

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func run() error {
	defer cleanup()
	if os.Geteuid() != 0 {
		return fmt.Errorf("run as root: the demo creates network namespaces")
	}
	dir, err := os.MkdirTemp("", "tabby-demo-")
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() { os.RemoveAll(dir) })
	// The plugin's IPAM block hints (see cni-plugin/plugin/blockhints.go)
	// stay in the demo's folder, so nothing is left after it.
	if err := os.Setenv("TABBY_CNI_HINT_DIR", filepath.Join(dir, "hints")); err != nil {
		return err
	}

	step("starting etcd (unix socket, reachable from every namespace)")
	endpoint, err := startEtcd(dir)
	if err != nil {
		return err
	}
	client, err := etcd.New(etcd.Config{Endpoints: []string{endpoint}})
	if err != nil {
		return err
	}
	defer client.Close()
	ctx := context.Background()
	if err := datastore.EnsureInitialized(ctx, client, "demo", "demo,etcd"); err != nil {
		return err
	}
	pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool}, ObjectMeta: metav1.ObjectMeta{Name: "demo-pool"},
		Spec: v3.IPPoolSpec{CIDR: "10.88.0.0/16"}}
	if _, err := client.Create(ctx, pool); err != nil {
		return err
	}
	step("created IPPool demo-pool 10.88.0.0/16 (defaults: blockSize 26, ipipMode Never)")
	// The namespace's profile, as kube-controllers (or the Kubernetes
	// datastore) provides it: allow unless a policy says otherwise.
	profile := &v3.Profile{TypeMeta: metav1.TypeMeta{Kind: v3.KindProfile}, ObjectMeta: metav1.ObjectMeta{Name: "kns.default"},
		Spec: v3.ProfileSpec{Ingress: []v3.Rule{{Action: v3.Allow}}, Egress: []v3.Rule{{Action: v3.Allow}}}}
	if _, err := client.Create(ctx, profile); err != nil {
		return err
	}

	step("building the calico CNI plugin and felix")
	bin := filepath.Join(dir, "bin")
	for name, pkg := range map[string]string{"calico": "github.com/tabbynet/tabby/cni-plugin/cmd/calico", "felix": "github.com/tabbynet/tabby/felix/cmd/felix"} {
		out, err := exec.Command("go", "build", "-o", filepath.Join(bin, name), pkg).CombinedOutput()
		if err != nil {
			return fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
		}
	}

	node, err := newNS()
	if err != nil {
		return err
	}
	if err := netnstest.ShapeNode(node); err != nil {
		return err
	}
	step("node namespace %s (uplink 192.0.2.1/24)", node.Path())

	conflist := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"k8s-pod-network","plugins":[{"type":"calico","datastore_type":"etcdv3",
"etcd_endpoints":%q,"nodename":"demo-node","mtu":1440,"ipam":{"type":"calico-ipam"}}]}`, endpoint)
	list, err := libcni.ConfListFromBytes([]byte(conflist))
	if err != nil {
		return err
	}
	cni := libcni.NewCNIConfigWithCacheDir([]string{bin}, filepath.Join(dir, "cache"), nil)

	type pod struct {
		name string
		ns   ns.NetNS
		rt   *libcni.RuntimeConf
		ip   string
	}
	var pods []*pod
	for _, name := range []string{"frontend", "backend"} {
		n, err := newNS()
		if err != nil {
			return err
		}
		p := &pod{name: name, ns: n, rt: &libcni.RuntimeConf{ContainerID: "demo-" + name, NetNS: n.Path(), IfName: "eth0",
			Args: [][2]string{{"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}}}}
		start := time.Now()
		var res *current.Result
		err = node.Do(func(ns.NetNS) error {
			r, err := cni.AddNetworkList(ctx, list, p.rt)
			if err != nil {
				return err
			}
			res, err = current.NewResultFromResult(r)
			return err
		})
		if err != nil {
			return fmt.Errorf("CNI ADD %s: %w", name, err)
		}
		p.ip = res.IPs[0].Address.IP.String()
		step("CNI ADD pod %-8s -> %s on %s (%.1f ms)", name, p.ip, res.Interfaces[0].Name, float64(time.Since(start).Microseconds())/1000)
		pods = append(pods, p)
	}

	addr := net.JoinHostPort(pods[1].ip, "8080")
	ln, err := netnstest.ListenTCP(pods[1].ns, addr, "hello from backend")
	if err != nil {
		return err
	}
	cleanups = append(cleanups, func() { ln.Close() })
	for _, from := range []struct {
		name string
		n    ns.NetNS
	}{{"frontend pod", pods[0].ns}, {"node", node}} {
		got, err := netnstest.DialTCP(from.n, addr)
		if err != nil {
			return fmt.Errorf("%s -> backend: %w", from.name, err)
		}
		step("TCP %s -> backend %s: %q", from.name, addr, got)
	}

	if err := policyDemo(ctx, client, endpoint, bin, node, pods[0].ns, addr); err != nil {
		return err
	}

	weps, err := client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		return err
	}
	for _, w := range weps.Items {
		s := w.(*v3.WorkloadEndpoint).Spec
		step("WorkloadEndpoint %s: node %s, %s, interface %s", w.GetName(), s.Node, strings.Join(s.IPNetworks, ","), s.InterfaceName)
	}
	blocks, _ := client.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	for _, b := range blocks.Items {
		blk := b.(*v3.IPAMBlock)
		js, _ := json.Marshal(blk.Spec.Affinity)
		step("IPAM block %s affine to %s", blk.Spec.CIDR, js)
	}

	for _, p := range pods {
		if err := node.Do(func(ns.NetNS) error { return cni.DelNetworkList(ctx, list, p.rt) }); err != nil {
			return fmt.Errorf("CNI DEL %s: %w", p.name, err)
		}
	}
	weps, _ = client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	handles, _ := client.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{})
	live := 0
	for _, h := range handles.Items {
		live += len(h.(*v3.IPAMHandle).Spec.Block)
	}
	step("CNI DEL both pods: %d WorkloadEndpoints and %d allocations left", len(weps.Items), live)
	fmt.Println("demo OK")
	return nil
}

// policyDemo runs felix for the node namespace and shows a policy cut and
// re-open traffic from the frontend pod to the backend at addr.
func policyDemo(ctx context.Context, client datastore.Client, endpoint, bin string, node, frontend ns.NetNS, addr string) error {
	// Label the backend's endpoint so a policy can select it.
	weps, err := client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		return err
	}
	for _, w := range weps.Items {
		if w.(*v3.WorkloadEndpoint).Spec.Pod == "backend" {
			w.SetLabels(map[string]string{"projectcalico.org/namespace": "default", "projectcalico.org/orchestrator": "k8s", "app": "backend"})
			if _, err := client.Update(ctx, w); err != nil {
				return err
			}
		}
	}
	felix := exec.Command(filepath.Join(bin, "felix"))
	felix.Env = append(os.Environ(), "DATASTORE_TYPE=etcdv3", "ETCD_ENDPOINTS="+endpoint, "FELIX_FELIXHOSTNAME=demo-node",
		"TABBY_FELIX_NETNS="+node.Path(), "FELIX_HEALTHENABLED=false", "FELIX_PROMETHEUSMETRICSENABLED=false",
		"FELIX_LOGSEVERITYSCREEN=Warning", "FELIX_ENDPOINTSTATUSPATHPREFIX="+filepath.Join(filepath.Dir(bin), "status"),
		"TABBY_FELIX_MTU_FILE="+filepath.Join(filepath.Dir(bin), "mtu"))
	felix.Stdout, felix.Stderr = os.Stdout, os.Stderr
	if err := felix.Start(); err != nil {
		return fmt.Errorf("starting felix: %w", err)
	}
	cleanups = append(cleanups, func() { felix.Process.Signal(os.Interrupt); felix.Wait() })
	step("felix started for the node namespace")

	gnp := &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy}, ObjectMeta: metav1.ObjectMeta{Name: "backend-ingress"},
		Spec: v3.GlobalNetworkPolicySpec{Selector: "app == 'backend'", Types: []v3.PolicyType{v3.PolicyTypeIngress}}}
	created, err := client.Create(ctx, gnp)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := waitFor(func() bool { _, err := netnstest.DialTCPWithin(frontend, addr, time.Second); return err != nil }); err != nil {
		return fmt.Errorf("the deny-all ingress policy never took effect")
	}
	step("GlobalNetworkPolicy backend-ingress (selector app == 'backend', no rules = deny): frontend -> backend now refused (%.0f ms)", float64(time.Since(start).Milliseconds()))

	allow := created.(*v3.GlobalNetworkPolicy)
	allow.Spec.Ingress = []v3.Rule{{Action: v3.Allow, Protocol: protoTCP(), Destination: v3.EntityRule{Ports: []numorstring.Port{numorstring.SinglePort(8080)}}}}
	if _, err := client.Update(ctx, allow); err != nil {
		return err
	}
	start = time.Now()
	if err := waitFor(func() bool {
		got, err := netnstest.DialTCPWithin(frontend, addr, time.Second)
		return err == nil && got != ""
	}); err != nil {
		return fmt.Errorf("the allow rule never took effect")
	}
	got, _ := netnstest.DialTCPWithin(frontend, addr, time.Second)
	step("policy now allows TCP 8080: frontend -> backend %q again (%.0f ms)", got, float64(time.Since(start).Milliseconds()))
	if _, err := client.Delete(ctx, datastore.KeyOf(allow), datastore.DeleteOptions{}); err != nil {
		return err
	}
	return nil
}

func protoTCP() *numorstring.Protocol {
	p := numorstring.ProtocolFromString("TCP")
	return &p
}

func waitFor(cond func() bool) error {
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return nil
		}
	}
	return fmt.Errorf("timed out")
}

func startEtcd(dir string) (string, error) {
	binDir := os.Getenv("TABBY_KUBE_BIN")
	if binDir == "" {
		home, _ := os.UserHomeDir()
		binDir = filepath.Join(home, ".cache", "tabby-kube", "bin")
	}
	sock := "localhost:2379"
	cmd := exec.Command(filepath.Join(binDir, "etcd"), "--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", "unix://"+sock, "--advertise-client-urls", "unix://"+sock,
		"--listen-peer-urls", "unix://localhost:2380", "--initial-advertise-peer-urls", "unix://localhost:2380",
		"--initial-cluster", "default=unix://localhost:2380", "--unsafe-no-fsync", "--log-level", "error")
	cmd.Dir = dir
	if err := cmd.Start(); err != nil {
		return "", fmt.Errorf("starting etcd (run hack/build-kube-binaries.sh first): %w", err)
	}
	cleanups = append(cleanups, func() { cmd.Process.Kill(); cmd.Wait() })
	endpoint := "unix://" + filepath.Join(dir, sock)
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(filepath.Join(dir, sock)); err == nil {
			return endpoint, nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", fmt.Errorf("etcd did not start")
}

func newNS() (ns.NetNS, error) {
	n, err := testutils.NewNS()
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() { n.Close(); testutils.UnmountNS(n) })
	return n, nil
}
