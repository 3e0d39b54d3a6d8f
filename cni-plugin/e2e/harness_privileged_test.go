//go:build privileged

package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/etcd"
	"github.com/tabbynet/tabby/internal/netnstest"
	"github.com/tabbynet/tabby/internal/testservers"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// cniBinDir builds the calico plugin (and portmap from
// containernetworking/plugins) once per test binary.
func cniBinDir(t testing.TB) string {
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tabby-cni-bin-")
		if buildErr != nil {
			return
		}
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		for name, pkg := range map[string]string{
			"calico":     "github.com/tabbynet/tabby/cni-plugin/cmd/calico",
			"calico-k8s": "github.com/tabbynet/tabby/cni-plugin/cmd/calico-k8s",
			"portmap":    "github.com/containernetworking/plugins/plugins/meta/portmap",
			"ptp":        "github.com/containernetworking/plugins/plugins/main/ptp",
			"host-local": "github.com/containernetworking/plugins/plugins/ipam/host-local",
		} {
			out, err := exec.Command(goBin, "build", "-o", filepath.Join(binDir, name), pkg).CombinedOutput()
			if err != nil {
				buildErr = fmt.Errorf("building %s: %v\n%s", name, err, out)
				return
			}
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// cluster is one node namespace with the CNI set up like a kubelet's, and
// a real etcd holding the pools.
type cluster struct {
	t      testing.TB
	node   ns.NetNS
	etcd   *testservers.Etcd
	client datastore.Client
	cni    *libcni.CNIConfig
	list   *libcni.NetworkConfigList
	confs  string
}

type clusterOpts struct {
	pools      []string // CIDRs
	assignIPv6 bool
	portmap    bool
	ipamType   string // default calico-ipam
	extraIPAM  map[string]any
	// etcdSecurity: "" plain, "tls" (client certificates, the netconf's
	// etcd_*_file settings) or "auth" (username/password from the
	// runtime's environment).
	etcdSecurity string
}

func newCluster(t testing.TB, o clusterOpts) *cluster {
	c := &cluster{t: t, node: netnstest.NewNode(t)}
	// The plugins (started by libcni with this process's environment)
	// keep their IPAM block hints in the test's folder.
	t.Setenv("TABBY_CNI_HINT_DIR", t.TempDir())
	etcdConf := map[string]any{}
	clientCfg := etcd.Config{}
	switch o.etcdSecurity {
	case "tls":
		s := testservers.StartEtcdTLS(t)
		c.etcd = s.Etcd
		etcdConf = map[string]any{"etcd_ca_cert_file": s.CA.CAFile, "etcd_cert_file": s.Client.CertFile, "etcd_key_file": s.Client.KeyFile}
		clientCfg.TLS = etcd.TLSFiles{CAFile: s.CA.CAFile, CertFile: s.Client.CertFile, KeyFile: s.Client.KeyFile}
	case "auth":
		c.etcd = testservers.StartEtcd(t)
		c.etcd.EnableAuth(t, "calico", "s3cret", "rootpw")
		t.Setenv("ETCD_USERNAME", "calico")
		t.Setenv("ETCD_PASSWORD", "s3cret")
		clientCfg.Username, clientCfg.Password = "calico", "s3cret"
	default:
		c.etcd = testservers.StartEtcd(t)
	}
	clientCfg.Endpoints = []string{c.etcd.Endpoint()}
	var err error
	c.client, err = etcd.New(clientCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.client.Close() })
	for i, cidr := range o.pools {
		c.createPool(fmt.Sprintf("pool-%d", i), cidr)
	}
	ipamConf := map[string]any{"type": "calico-ipam"}
	if o.ipamType != "" {
		ipamConf = map[string]any{"type": o.ipamType}
	}
	if o.assignIPv6 {
		ipamConf["assign_ipv6"] = "true"
	}
	for k, v := range o.extraIPAM {
		ipamConf[k] = v
	}
	plugins := []any{map[string]any{
		"type": "calico", "log_level": "info", "datastore_type": "etcdv3",
		"etcd_endpoints": c.etcd.UnixEndpoint(), "nodename": "node1", "mtu": 1440,
		"ipam": ipamConf, "container_settings": map[string]any{"allow_ip_forwarding": true},
	}}
	for k, v := range etcdConf {
		plugins[0].(map[string]any)[k] = v
	}
	if o.portmap {
		plugins = append(plugins, map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}, "snat": true})
	}
	conflist, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": plugins})
	c.confs = t.TempDir()
	path := filepath.Join(c.confs, "10-calico.conflist")
	if err := os.WriteFile(path, conflist, 0o644); err != nil {
		t.Fatal(err)
	}
	c.list, err = libcni.ConfListFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	c.cni = libcni.NewCNIConfigWithCacheDir([]string{cniBinDir(t)}, t.TempDir(), nil)
	return c
}

func (c *cluster) createPool(name, cidr string) { c.createPoolSelecting(name, cidr, "") }

// createPoolSelecting creates a pool with a namespaceSelector (for
// workloads only: such a pool may not allow Tunnel).
func (c *cluster) createPoolSelecting(name, cidr, namespaceSelector string) {
	spec := v3.IPPoolSpec{CIDR: cidr, NamespaceSelector: namespaceSelector}
	if namespaceSelector != "" {
		spec.AllowedUses = []v3.IPPoolAllowedUse{v3.IPPoolAllowedUseWorkload}
	}
	_, err := c.client.Create(context.Background(), &v3.IPPool{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindIPPool},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       spec,
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

type pod struct {
	netns ns.NetNS
	rt    *libcni.RuntimeConf
	res   *current.Result
}

func (c *cluster) newPod(name string) *pod { return c.newPodIn("default", name) }

// newPodIn is a pod of a namespace (its container ID is made of its name
// only: names must differ across namespaces).
func (c *cluster) newPodIn(namespace, name string) *pod {
	n := netnstest.New(c.t)
	return &pod{netns: n, rt: &libcni.RuntimeConf{
		ContainerID: "cid-" + name + "-0123456789abcdef",
		NetNS:       n.Path(),
		IfName:      "eth0",
		Args:        [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", namespace}, {"K8S_POD_NAME", name}, {"K8S_POD_INFRA_CONTAINER_ID", "x"}},
	}}
}

// inNode runs f on a thread inside the node namespace: libcni execs the
// plugins from there, exactly as a runtime execs them in the host's.
func (c *cluster) inNode(f func() error) error {
	var err error
	if derr := c.node.Do(func(ns.NetNS) error { err = f(); return nil }); derr != nil {
		return derr
	}
	return err
}

func (c *cluster) add(p *pod) error {
	return c.inNode(func() error {
		r, err := c.cni.AddNetworkList(context.Background(), c.list, p.rt)
		if err != nil {
			return err
		}
		p.res, err = current.NewResultFromResult(r)
		return err
	})
}

func (c *cluster) mustAdd(p *pod) {
	c.t.Helper()
	if err := c.add(p); err != nil {
		c.t.Fatalf("ADD %s: %v", p.rt.ContainerID, err)
	}
}

func (c *cluster) del(p *pod) error {
	return c.inNode(func() error { return c.cni.DelNetworkList(context.Background(), c.list, p.rt) })
}

func (c *cluster) check(p *pod) error {
	return c.inNode(func() error { return c.cni.CheckNetworkList(context.Background(), c.list, p.rt) })
}

func (p *pod) ip(v6 bool) string {
	for _, ip := range p.res.IPs {
		if (ip.Address.IP.To4() == nil) == v6 {
			return ip.Address.IP.String()
		}
	}
	return ""
}

func serve(t *testing.T, n ns.NetNS, addr, reply string) string {
	return netnstest.ServeTCP(t, n, addr, reply)
}

func dial(n ns.NetNS, addr string) (string, error) { return netnstest.DialTCP(n, addr) }

// cniCode extracts the CNI error code of a failed call.
func cniCode(err error) (uint, string) {
	var te *types.Error
	if !errors.As(err, &te) {
		return 0, fmt.Sprint(err)
	}
	return te.Code, te.Msg + ": " + te.Details
}

// leftovers lists what the node still holds for pods: cali links, pod
// routes, WorkloadEndpoints and IPAM allocations.
func (c *cluster) leftovers() []string {
	var out []string
	c.inNode(func() error {
		o, _ := exec.Command("ip", "-o", "link", "show").CombinedOutput()
		for _, l := range strings.Split(string(o), "\n") {
			if strings.Contains(l, ": cali") {
				out = append(out, "link "+strings.Fields(l)[1])
			}
		}
		o, _ = exec.Command("ip", "route", "show", "proto", "boot").CombinedOutput()
		for _, l := range strings.Split(strings.TrimSpace(string(o)), "\n") {
			if l != "" && !strings.HasPrefix(l, "default") { // the node's own uplink route
				out = append(out, "route "+l)
			}
		}
		return nil
	})
	ctx := context.Background()
	weps, err := c.client.List(ctx, v3.KindWorkloadEndpoint, datastore.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, w := range weps.Items {
		out = append(out, "wep "+w.GetName())
	}
	blocks, err := c.client.List(ctx, v3.KindIPAMBlock, datastore.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, b := range blocks.Items {
		for i, a := range b.(*v3.IPAMBlock).Spec.Allocations {
			if a != nil {
				out = append(out, fmt.Sprintf("allocation %s[%d]", b.GetName(), i))
			}
		}
	}
	handles, err := c.client.List(ctx, v3.KindIPAMHandle, datastore.ListOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	for _, h := range handles.Items {
		if len(h.(*v3.IPAMHandle).Spec.Block) > 0 {
			out = append(out, "handle "+h.GetName())
		}
	}
	return out
}
