package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// Datastores Tabby can be installed with.
const (
	DatastoreKubernetes = "kubernetes"
	DatastoreEtcd       = "etcdv3"
)

// Options shape a cluster.
type Options struct {
	// Dir is the state folder (DefaultStateDir when "").
	Dir string
	// Bin holds tabby-lab, tabby-pause (make build's bin/) and the
	// standard loopback CNI plugin (containernetworking/plugins); KubeBin
	// the Kubernetes binaries (hack/build-kube-binaries.sh node).
	Bin, KubeBin string
	// Nodes (default 3) are spread over Subnets (default 2) in order:
	// with 3 and 2, node-1 and node-2 share subnet 0, node-3 is alone on
	// subnet 1 (so VXLAN CrossSubnet has both cases).
	Nodes, Subnets int
	// Manifest is what `kubectl apply -f` installs (manifests/tabby.yaml,
	// or tabby-etcd.yaml with Datastore etcdv3); ImageTar the Tabby image
	// it names (make image's bin/tabby-image.tar).
	Manifest, ImageTar string
	Datastore          string
	// PoolMode is the default IP pool's encapsulation, set on the
	// calico-node DaemonSet as a user would: vxlan (default),
	// vxlan-crosssubnet or bgp (no encapsulation).
	PoolMode string
	// DNS runs CoreDNS (hack/build-coredns.sh: KubeBin/coredns) as the
	// cluster DNS, the kubelets' clusterDNS pointing at its Service, and
	// gives agnhost what the DNS e2e's probers run (dns.go).
	DNS bool
	// VMNodes adds that many nodes that are qemu VMs on Debian's kernel
	// (vmnode.go), for what this machine's kernel lacks (SCTP).
	VMNodes int
	Out     io.Writer
}

// Cluster is a running (or half-built) cluster and its state.
type Cluster struct {
	Dir, Bin, KubeBin string
	State             State
	out               io.Writer
}

func (o *Options) defaults() {
	if o.Dir == "" {
		o.Dir = DefaultStateDir
	}
	if o.Nodes == 0 {
		o.Nodes = 3
	}
	if o.Subnets == 0 {
		o.Subnets = 2
	}
	if o.Subnets > o.Nodes {
		o.Subnets = o.Nodes
	}
	if o.Datastore == "" {
		o.Datastore = DatastoreKubernetes
	}
	if o.PoolMode == "" {
		o.PoolMode = "vxlan"
	}
	if o.Out == nil {
		o.Out = io.Discard
	}
}

// planNodes names and addresses the nodes.
func planNodes(dir, prefix string, nodes, subnets int) []NodeState {
	per := (nodes + subnets - 1) / subnets
	out := make([]NodeState, nodes)
	for i := range out {
		s := i / per
		name := fmt.Sprintf("node-%d", i+1)
		out[i] = NodeState{Name: name, Netns: prefix + "-" + name, Subnet: s,
			Addr: nodeAddr(s, i%per).String(), Dir: filepath.Join(dir, "nodes", name)}
	}
	return out
}

// Up builds the cluster and installs Tabby on it, printing each step's
// time. On failure what was built stays for inspection; Down removes it.
func Up(ctx context.Context, o Options) (*Cluster, error) {
	o.defaults()
	// Commands run in the nodes' mount namespaces, where the working
	// folder is /.
	for _, p := range []*string{&o.Dir, &o.Bin, &o.KubeBin, &o.Manifest, &o.ImageTar} {
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		*p = abs
	}
	if err := checkBinaries(o); err != nil {
		return nil, err
	}
	prefix, err := newPrefix(o.Dir)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: o.Dir, Bin: o.Bin, KubeBin: o.KubeBin, out: o.Out,
		State: State{Prefix: prefix, Datastore: o.Datastore, DNS: o.DNS, Phase: "starting"}}
	c.State.Nodes = planNodes(o.Dir, prefix, o.Nodes, o.Subnets)
	c.State.VMNodes = planVMNodes(o.Dir, o.VMNodes)
	if err := c.State.save(c.Dir); err != nil {
		return nil, err
	}
	start := time.Now()
	p, tok, err := c.upControlPlane(ctx, o.Subnets)
	if err != nil {
		return c, err
	}
	tars, err := c.writeNodeFiles(o.ImageTar)
	if err != nil {
		return c, err
	}
	if len(c.State.VMNodes) > 0 {
		if err := c.step("VM nodes: qemu started", func() error { return c.bootVMNodes(ctx, tars, p.CAFile, tok) }); err != nil {
			return c, err
		}
	}
	if err := c.step("nodes: containerd, images", func() error { return c.prepareNodes(tars) }); err != nil {
		return c, err
	}
	if err := c.step("kubectl apply -f "+filepath.Base(o.Manifest), func() error { return c.install(ctx, o) }); err != nil {
		return c, err
	}
	if err := c.step("kubelets, kube-proxies", func() error { return c.startKubelets(p, tok) }); err != nil {
		return c, err
	}
	ready := 5 * time.Minute
	if len(c.State.VMNodes) > 0 {
		ready = vmReadyTimeout // the VMs import their images under TCG
	}
	if err := c.step("nodes Ready, calico-node and kube-controllers ready", func() error { return c.WaitReady(ctx, ready) }); err != nil {
		return c, err
	}
	c.State.Phase = "up"
	fmt.Fprintf(c.out, "cluster up in %s\n", time.Since(start).Round(100*time.Millisecond))
	return c, c.State.save(c.Dir)
}

// step runs f, printing its name and time, and saves the state.
func (c *Cluster) step(name string, f func() error) error {
	t := time.Now()
	if err := f(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	fmt.Fprintf(c.out, "%-55s %6.1fs\n", name, time.Since(t).Seconds())
	return c.State.save(c.Dir)
}

func checkBinaries(o Options) error {
	var missing []string
	kube := []string{"etcd", "kube-apiserver", "kubectl", "kube-controller-manager", "kube-scheduler", "kubelet", "kube-proxy", "agnhost", "agnhost-porter/localhost.crt"}
	if o.DNS {
		kube = append(kube, "coredns")
	}
	for _, b := range kube {
		if _, err := os.Stat(filepath.Join(o.KubeBin, b)); err != nil {
			missing = append(missing, filepath.Join(o.KubeBin, b))
		}
	}
	for _, b := range []string{"tabby-lab", "tabby-pause", "loopback"} {
		if _, err := os.Stat(filepath.Join(o.Bin, b)); err != nil {
			missing = append(missing, filepath.Join(o.Bin, b))
		}
	}
	for _, f := range []string{o.Manifest, o.ImageTar} {
		if _, err := os.Stat(f); err != nil {
			missing = append(missing, f)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %v: run `hack/build-kube-binaries.sh node` (and hack/build-coredns.sh for the DNS), `make build` and `make image` first (or `make cluster`)", missing)
	}
	for _, t := range []string{"containerd", "runc", "ctr", "nsenter", "unshare", "iptables"} {
		if _, err := exec.LookPath(t); err != nil {
			return fmt.Errorf("%s not found: apt-get install containerd runc util-linux iptables", t)
		}
	}
	return nil
}

// upControlPlane makes the control plane's namespace and starts etcd,
// kube-apiserver, the forwarder, kube-controller-manager and
// kube-scheduler.
func (c *Cluster) upControlPlane(ctx context.Context, subnets int) (*pki, tokens, error) {
	var p *pki
	tok := newTokens(c.State.nodeNames())
	err := c.step("control plane: etcd, kube-apiserver ready", func() error {
		var err error
		if p, err = newPKI(filepath.Join(c.Dir, "pki")); err != nil {
			return err
		}
		if err := makeControlPlaneNetns(c.cpNetns(), subnets); err != nil {
			return err
		}
		if err := c.startEtcd(); err != nil {
			return err
		}
		if err := c.startForwarder(p, tok); err != nil {
			return err
		}
		if err := c.startAPIServer(p, tok); err != nil {
			return err
		}
		return c.waitAPI(ctx, 90*time.Second)
	})
	if err != nil {
		return nil, tok, err
	}
	return p, tok, c.step("controller-manager, scheduler, pod-routes started", func() error {
		if err := c.startControllers(p); err != nil {
			return err
		}
		return c.startPodRoutes()
	})
}

// startForwarder starts `tabby-lab cluster forward` from two free ports
// of the root namespace's loopback to the API server and etcd, and writes
// the kubeconfigs.
func (c *Cluster) startForwarder(p *pki, tok tokens) error {
	api, err := harness.FreePort()
	if err != nil {
		return err
	}
	etcd, err := harness.FreePort()
	if err != nil {
		return err
	}
	c.State.APIServer = "https://127.0.0.1:" + strconv.Itoa(api)
	c.State.Etcd = "http://127.0.0.1:" + strconv.Itoa(etcd)
	c.State.Kubeconfig = filepath.Join(c.Dir, "admin.kubeconfig")
	if err := os.WriteFile(c.State.Kubeconfig, []byte(kubeconfig(c.State.APIServer, p.CAFile, tok.Admin)), 0o600); err != nil {
		return err
	}
	cp := kubeconfig(fmt.Sprintf("https://%s:%d", cpAddr, apiPort), p.CAFile, tok.Admin)
	if err := os.WriteFile(filepath.Join(c.Dir, "cp.kubeconfig"), []byte(cp), 0o600); err != nil {
		return err
	}
	_, err = c.spawn("forward", filepath.Join(c.Bin, "tabby-lab"), "cluster", "forward", "--netns", netnsPath(c.cpNetns()),
		fmt.Sprintf("127.0.0.1:%d=%s:%d", api, cpAddr, apiPort), fmt.Sprintf("127.0.0.1:%d=%s:%d", etcd, cpAddr, etcdPort))
	return err
}

// writeNodeFiles writes what every node reads (containerd's
// configuration, the support images) and returns the image tarballs to
// import, imageTar (Tabby's) last.
func (c *Cluster) writeNodeFiles(imageTar string) ([]string, error) {
	if err := os.WriteFile(filepath.Join(c.Dir, "containerd.toml"), []byte(c.containerdConfig()), 0o644); err != nil {
		return nil, err
	}
	tars, err := c.writeSupportImages(c.State.DNS)
	if err != nil {
		return nil, err
	}
	return append(tars, imageTar), nil
}

// prepareNodes builds every node up to a running containerd with the
// images imported, in parallel.
func (c *Cluster) prepareNodes(tars []string) error {
	for i := range c.State.Nodes {
		n := &c.State.Nodes[i]
		var err error
		if err := makeNodeNetns(c.cpNetns(), *n); err != nil {
			return err
		}
		if n.Holder, err = c.startHolder(*n); err != nil {
			return err
		}
	}
	if err := c.State.save(c.Dir); err != nil {
		return err
	}
	errs := make([]error, len(c.State.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.State.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = c.prepareNode(n, tars)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func (c *Cluster) prepareNode(n NodeState, tars []string) error {
	if err := mountNode(n); err != nil {
		return err
	}
	if err := c.makeCgroups(n); err != nil {
		return err
	}
	// containerd's CRI runs the standard loopback plugin for every pod's
	// lo: it comes with a node's OS (kubernetes-cni, Debian's
	// containernetworking-plugins), not with Calico's or Tabby's CNI.
	if err := copyFile(filepath.Join(c.Bin, "loopback"), filepath.Join(n.Dir, "opt-cni-bin", "loopback")); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	if err := c.startContainerd(n); err != nil {
		return err
	}
	return importImages(n, tars)
}

func (c *Cluster) startKubelets(p *pki, tok tokens) error {
	for _, n := range c.State.Nodes {
		if err := c.startKubelet(n, p, tok); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o755)
}

func randHex(n int) string {
	b := make([]byte, n/2)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
