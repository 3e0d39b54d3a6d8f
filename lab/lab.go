package lab

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/lab/internal/harness"
)

// Lab is a running (or half-built) lab, found through its state folder.
type Lab struct {
	// Dir is the state folder: everything the lab writes lives there.
	Dir string
	// Bin holds the binaries the lab runs: felix, confd, calico,
	// calico-ipam, calico-k8s, calicoctl, tabby-lab (`make build`'s bin/).
	Bin   string
	State *State
	// Out receives progress lines.
	Out io.Writer

	mu sync.Mutex
	ds datastore.Client
	// udpPorts are the UDP probes' source ports (fresh flows, see
	// probePorts).
	udpPorts probePorts
	// flows, flowFlush: up's Flows and FlowFlush.
	flows     bool
	flowFlush time.Duration
}

// UpOptions say what to build.
type UpOptions struct {
	Dir       string
	Bin       string
	Model     *Model
	Datastore string // DatastoreEtcd (default) or DatastoreKubernetes
	// Dataplane is DataplaneIptables or DataplaneNftables (felix's
	// nftablesMode Disabled or Enabled on every node); "" leaves it to
	// felix's default (Auto).
	Dataplane string
	Out       io.Writer
	// VMs makes each node a VM on Debian's kernel (vms.go).
	VMs bool
	// Flows starts the flow aggregator and its page and points every
	// node's felix at it (goldmane.go; not with VMs). FlowFlush is then
	// FlowLogsFlushInterval (0: 15 s, as Calico's operator).
	Flows     bool
	FlowFlush time.Duration
}

// Open finds the lab in dir.
func Open(dir, bin string, out io.Writer) (*Lab, error) {
	s, err := readState(dir)
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = io.Discard
	}
	return &Lab{Dir: dir, Bin: bin, State: s, Out: out}, nil
}

// Close releases the datastore connection.
func (l *Lab) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ds != nil {
		_ = l.ds.Close()
		l.ds = nil
	}
}

func (l *Lab) step(format string, args ...any) {
	fmt.Fprintf(l.Out, "==> "+format+"\n", args...)
}

func (l *Lab) save() error { return writeState(l.Dir, l.State) }

// Up builds the lab. It refuses to build over an existing one. On failure
// what was built stays (its logs are in the state folder) and the error
// says to run down.
func Up(ctx context.Context, o UpOptions) (*Lab, error) {
	if o.Model == nil {
		o.Model = DefaultModel()
	}
	if o.Datastore == "" {
		o.Datastore = DatastoreEtcd
	}
	if o.Datastore != DatastoreEtcd && o.Datastore != DatastoreKubernetes {
		return nil, fmt.Errorf("--datastore %q: use etcd or kubernetes", o.Datastore)
	}
	if o.Dataplane != "" && o.Dataplane != DataplaneIptables && o.Dataplane != DataplaneNftables {
		return nil, fmt.Errorf("--dataplane %q: use iptables or nftables", o.Dataplane)
	}
	if o.Dataplane != "" && o.VMs {
		return nil, errors.New("--dataplane is not wired into the VMs' agents yet: leave it out with --vms")
	}
	if o.Flows && o.VMs {
		return nil, errors.New("--flows is not wired into the VMs' agents yet: add --flows=false with --vms")
	}
	if o.Datastore == DatastoreEtcd {
		for _, p := range o.Model.Pods {
			if p.IP != "" {
				return nil, fmt.Errorf("pod %s asks for ip %s: a fixed address is requested through the pod's cni.projectcalico.org/ipAddrs annotation, which needs --datastore kubernetes", p.Key(), p.IP)
			}
		}
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
	if os.Geteuid() != 0 {
		return nil, errors.New("run as root: the lab creates network namespaces")
	}
	if prefix, err := readPrefix(o.Dir); err != nil {
		return nil, err
	} else if prefix != "" {
		return nil, fmt.Errorf("a lab (%s) is already in %s: run tabby-lab down first", prefix, o.Dir)
	}
	for _, b := range []string{"calico-node", "calico", "calico-ipam", "calico-k8s", "tabby-lab"} {
		if _, err := os.Stat(filepath.Join(o.Bin, b)); err != nil {
			return nil, fmt.Errorf("%s is missing from %s: run make build (or pass --bin): %w", b, o.Bin, err)
		}
	}
	if err := serversPresent(o.Datastore); err != nil {
		return nil, err
	}
	if ents, err := os.ReadDir(o.Dir); err == nil && len(ents) > 0 {
		return nil, fmt.Errorf("%s is not empty: the state folder must be new or empty (down removes it whole)", o.Dir)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	l := &Lab{Dir: o.Dir, Bin: o.Bin, Out: o.Out, flows: o.Flows, flowFlush: o.FlowFlush,
		State: &State{Prefix: newPrefix(), Datastore: o.Datastore, Dataplane: o.Dataplane, Phase: "starting", Model: o.Model, VMs: o.VMs}}
	// The prefix first: from here on, down finds everything by it.
	if err := os.WriteFile(filepath.Join(o.Dir, harness.PrefixFile), []byte(l.State.Prefix), 0o644); err != nil {
		return nil, err
	}
	if err := l.save(); err != nil {
		return nil, err
	}
	if err := l.up(ctx); err != nil {
		l.Close()
		return nil, fmt.Errorf("%w (what was built stays for its logs in %s: run tabby-lab down)", err, o.Dir)
	}
	return l, nil
}

func (l *Lab) up(ctx context.Context) error {
	start := time.Now()
	m := l.State.Model
	// The plugin keeps its IPAM block hints in the lab's folder.
	if err := os.Setenv("TABBY_CNI_HINT_DIR", filepath.Join(l.Dir, "cni-hints")); err != nil {
		return err
	}
	l.step("lab %s: %d nodes, %d pods, %s datastore, %s dataplane, state in %s", l.State.Prefix, len(m.Nodes), len(m.Pods),
		l.State.Datastore, cmp.Or(l.State.Dataplane, "felix's default"), l.Dir)
	if err := l.startDatastore(ctx); err != nil {
		return err
	}
	l.step("datastore up (%s)", since(start))
	if err := l.createResources(ctx); err != nil {
		return err
	}
	if l.flows {
		if err := l.startGoldmane(); err != nil {
			return err
		}
		if err := l.pointFelixAtGoldmane(ctx, cmp.Or(l.flowFlush, labFlowFlush)); err != nil {
			return err
		}
		l.step("flow aggregator up, its page on %s (%s)", l.State.Goldmane.Page, since(start))
	}
	if l.State.VMs {
		return l.upVMs(ctx, start)
	}
	if err := l.buildUnderlay(ctx); err != nil {
		return err
	}
	if l.State.Datastore == DatastoreKubernetes {
		if err := l.startAPIProxy(); err != nil {
			return err
		}
		if err := l.writeNodeKubeconfigs(); err != nil {
			return err
		}
	}
	l.step("%d nodes on the underlay (%s)", len(l.State.Nodes), since(start))
	if err := parallel(len(l.State.Nodes), func(i int) error { return l.startAgent(ctx, &l.State.Nodes[i]) }); err != nil {
		return err
	}
	l.step("node agents started (%s networking) (%s)", m.networkingBackend(), since(start))
	if err := l.createPods(ctx); err != nil {
		return err
	}
	l.step("%d pods wired by the calico CNI plugin, serving (%s)", len(l.State.Pods), since(start))
	if err := l.waitAgentsReady(ctx, nil, 60*time.Second); err != nil {
		return err
	}
	l.step("node agents ready (%s)", since(start))
	n, err := l.waitConnected(ctx, 30*time.Second)
	if err != nil {
		return err
	}
	l.State.Phase = "up"
	if err := l.save(); err != nil {
		return err
	}
	l.step("lab up: all %d probes allowed (%s)", n, since(start))
	return nil
}

// waitConnected probes until every pod reaches every other on every port
// (no policy exists yet: all must be allowed), naming what is not after
// timeout. The servers have just started and BGP routes follow the
// sessions by a moment.
func (l *Lab) waitConnected(ctx context.Context, timeout time.Duration) (int, error) {
	deadline := time.Now().Add(timeout)
	for {
		// Short: an allowed probe answers in milliseconds, and a miss
		// is retried.
		res, err := l.Probe(ctx, nil, 300*time.Millisecond)
		if err != nil {
			return 0, err
		}
		var bad []string
		for _, r := range res {
			if !r.Allowed {
				bad = append(bad, r.String()+" ("+r.Detail+")")
			}
		}
		if len(bad) == 0 {
			return len(res), nil
		}
		if time.Now().After(deadline) {
			if len(bad) > 10 {
				bad = append(bad[:10], fmt.Sprintf("and %d more", len(bad)-10))
			}
			return 0, fmt.Errorf("pods not all connected after %s: %v", timeout, bad)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func since(t time.Time) string { return time.Since(t).Round(10 * time.Millisecond).String() }

// parallel runs f(0..n-1) at once and returns the first error.
func parallel(n int, f func(i int) error) error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// waitAgentsReady waits until the agents of nodes (nil: every node) are
// ready, naming the ones that are not after timeout.
func (l *Lab) waitAgentsReady(ctx context.Context, nodes []*NodeState, timeout time.Duration) error {
	if nodes == nil {
		for i := range l.State.Nodes {
			nodes = append(nodes, &l.State.Nodes[i])
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		var lagging []string
		for _, n := range nodes {
			if why := l.agentReady(ctx, n); why != "" {
				lagging = append(lagging, n.Name+": "+why)
			}
		}
		if len(lagging) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node agents not ready after %s: %v", timeout, lagging)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// createResources writes the model's pools and namespaces: in etcd mode
// the namespaces' profiles (kns.<name>) as kube-controllers stores them,
// with the Kubernetes datastore the Namespaces themselves.
func (l *Lab) createResources(ctx context.Context) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	for _, p := range l.State.Model.Pools {
		pool := &v3.IPPool{TypeMeta: metav1.TypeMeta{Kind: v3.KindIPPool, APIVersion: v3.GroupVersion},
			ObjectMeta: metav1.ObjectMeta{Name: p.Name}, Spec: p.Spec}
		if _, err := c.Create(ctx, pool); err != nil {
			return fmt.Errorf("creating IPPool %s: %w", p.Name, err)
		}
	}
	for _, ns := range l.State.Model.Namespaces {
		k8sNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, Labels: ns.Labels}}
		if l.State.Datastore == DatastoreKubernetes {
			kc, err := l.kube()
			if err != nil {
				return err
			}
			if _, err := kc.CoreV1().Namespaces().Create(ctx, k8sNS, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating namespace %s: %w", ns.Name, err)
			}
			continue
		}
		prof, err := kdd.NamespaceToProfile(k8sNS)
		if err != nil {
			return err
		}
		prof.ResourceVersion = ""
		if _, err := c.Create(ctx, prof); err != nil {
			return fmt.Errorf("creating profile %s: %w", prof.Name, err)
		}
	}
	return nil
}

// Underlay addressing: subnet s is 172.31.<s+1>.0/24, its router (the
// underlay namespace) .1, node i .<10+i>.
func subnetRouter(s int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 31, byte(s + 1), 1}), 24)
}

func nodeAddr(s, i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 31, byte(s + 1), byte(10 + i)}), 24)
}

// buildUnderlay makes the underlay namespace (a bridge per subnet, routing
// between them) and one namespace per node on it; with the Kubernetes
// datastore it also creates each Node as the kubelet would.
func (l *Lab) buildUnderlay(ctx context.Context) error {
	p := l.State.Prefix
	u, err := createNetns(p + "-underlay")
	if err != nil {
		return err
	}
	defer u.Close()
	if err := u.sysctl("net.ipv4.ip_forward", "1"); err != nil {
		return err
	}
	bridges := map[int]bool{}
	for i, spec := range l.State.Model.Nodes {
		s := spec.Subnet
		if !bridges[s] {
			br := fmt.Sprintf("br%d", s)
			if err := u.NL.LinkAdd(newBridge(br)); err != nil {
				return fmt.Errorf("bridge %s in the underlay: %w", br, err)
			}
			if err := addrUp(u, br, subnetRouter(s)); err != nil {
				return err
			}
			bridges[s] = true
		}
		n := NodeState{Name: spec.Name, Netns: p + "-n-" + spec.Name, Subnet: s, Addr: nodeAddr(s, i).String(),
			Dir: filepath.Join(l.Dir, "nodes", spec.Name)}
		if err := os.MkdirAll(n.Dir, 0o755); err != nil {
			return err
		}
		h, err := createNetns(n.Netns)
		if err != nil {
			return err
		}
		l.State.Nodes = append(l.State.Nodes, n)
		if err := l.save(); err != nil {
			h.Close()
			return err
		}
		err = l.plugNode(u, h, i, n)
		h.Close()
		if err != nil {
			return err
		}
	}
	if l.State.Datastore == DatastoreKubernetes {
		kc, err := l.kube()
		if err != nil {
			return err
		}
		for _, n := range l.State.Nodes {
			kn := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n.Name, Labels: map[string]string{"kubernetes.io/hostname": n.Name, "kubernetes.io/os": "linux"}}}
			if _, err := kc.CoreV1().Nodes().Create(ctx, kn, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("creating Kubernetes node %s: %w", n.Name, err)
			}
		}
	}
	return nil
}

// plugNode links node i's eth0 to its subnet's bridge.
func (l *Lab) plugNode(u, h *handle, i int, n NodeState) error {
	port := fmt.Sprintf("n%d", i)
	if err := veth(u, port, h, "eth0"); err != nil {
		return err
	}
	br, err := u.NL.LinkByName(fmt.Sprintf("br%d", n.Subnet))
	if err != nil {
		return err
	}
	pl, err := u.NL.LinkByName(port)
	if err != nil {
		return err
	}
	if err := u.NL.LinkSetMaster(pl, br); err != nil {
		return err
	}
	if err := addrUp(h, "eth0", netip.MustParsePrefix(n.Addr)); err != nil {
		return err
	}
	// ip_forward stays off: felix turns it on.
	return defaultRoute(h, subnetRouter(n.Subnet).Addr())
}

// Down removes the lab in dir: every process carrying its prefix, every
// namespace named with it, then the state folder. It works on a lab in
// any state, also one whose up was killed halfway.
func Down(dir string) error {
	prefix, err := readPrefix(dir)
	if err != nil {
		return err
	}
	if prefix == "" {
		// No lab was ever started here: remove the folder only if it is
		// empty (it may be any folder someone passed as --state).
		if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
			return fmt.Errorf("%s holds no lab (no %s file) and is not empty: not removing it", dir, harness.PrefixFile)
		}
		if err := os.Remove(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	if err := harness.KillAll(markedProcesses(prefix), time.Second); err != nil {
		return err
	}
	var errs []error
	for _, n := range harness.NetnsWithPrefix(prefix) {
		errs = append(errs, deleteNetns(n))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	return os.RemoveAll(dir)
}

// Leftovers lists what of the lab with prefix still exists outside its
// state folder: namespaces and processes.
func Leftovers(prefix string) []string {
	out := harness.NetnsWithPrefix(prefix)
	for _, p := range markedProcesses(prefix) {
		out = append(out, fmt.Sprintf("process %d", p))
	}
	return out
}
