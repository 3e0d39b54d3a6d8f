package multinode

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/felix/epstatus"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

// cniBinDir builds the calico plugin once per test binary (it also serves
// as calico-ipam).
func cniBinDir(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tabby-multinode-cni-")
		if buildErr != nil {
			return
		}
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		out, err := exec.Command(goBin, "build", "-o", filepath.Join(binDir, "calico"), "github.com/tabbynet/tabby/cni-plugin/cmd/calico").CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("building the calico plugin: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// nodeCNI is a node's CNI configuration, as the kubelet's host has it.
type nodeCNI struct {
	cfg  *libcni.CNIConfig
	list *libcni.NetworkConfigList
}

func (n *Node) cniConf() *nodeCNI {
	t := n.c.t
	t.Helper()
	if n.cni != nil {
		return n.cni
	}
	ipamConf := map[string]any{"type": "calico-ipam"}
	if n.c.ipv6 {
		ipamConf["assign_ipv6"] = "true"
	}
	conf, _ := json.Marshal(map[string]any{"cniVersion": "1.0.0", "name": "k8s-pod-network", "plugins": []any{map[string]any{
		"type": "calico", "log_level": "info", "datastore_type": "etcdv3",
		"etcd_endpoints": n.c.Etcd.UnixEndpoint(), "nodename": n.Name, "mtu": 1400,
		"ipam": ipamConf, "container_settings": map[string]any{"allow_ip_forwarding": true},
		"policy_setup_timeout_seconds": n.c.opts.PolicySetupTimeoutSeconds,
		"endpoint_status_dir":          filepath.Join(n.StatusPrefix, epstatus.DirName),
	}}})
	list, err := libcni.ConfListFromBytes(conf)
	if err != nil {
		t.Fatal(err)
	}
	n.cni = &nodeCNI{cfg: libcni.NewCNIConfigWithCacheDir([]string{cniBinDir(t)}, t.TempDir(), nil), list: list}
	return n.cni
}

// Pod is a pod namespace wired by the CNI plugin on a node.
type Pod struct {
	*Namespace
	Node *Node
	Name string
	// IP and IP6 are the pod's addresses (IP6 with Options.IPv6).
	IP, IP6 netip.Addr
	rt      *libcni.RuntimeConf
}

// AddPod creates a pod namespace and runs CNI ADD for it from inside the
// node's namespace; the pod is deleted (CNI DEL) when the test ends.
func (n *Node) AddPod(name string) *Pod {
	t := n.c.t
	t.Helper()
	p, err := n.TryAddPod(name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TryAddPod is AddPod returning the ADD's error.
func (n *Node) TryAddPod(name string) (*Pod, error) {
	cni := n.cniConf()
	p := &Pod{Node: n, Name: name, Namespace: newNamespace(n.c.t, n.Namespace.Name+"-"+name)}
	p.rt = &libcni.RuntimeConf{
		ContainerID: "cid-" + n.Name + "-" + name, NetNS: p.Path(), IfName: "eth0",
		Args: [][2]string{{"IgnoreUnknown", "1"}, {"K8S_POD_NAMESPACE", "default"}, {"K8S_POD_NAME", name}},
	}
	var res *current.Result
	err := n.inNode(func() error {
		r, err := cni.cfg.AddNetworkList(context.Background(), cni.list, p.rt)
		if err != nil {
			return err
		}
		res, err = current.NewResultFromResult(r)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("CNI ADD %s on %s: %w", name, n.Name, err)
	}
	n.c.t.Cleanup(func() { _ = p.Delete() })
	for _, ip := range res.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP.To4()); ok {
			p.IP = a
		} else if a, ok := netip.AddrFromSlice(ip.Address.IP); ok {
			p.IP6 = a
		}
	}
	return p, nil
}

// Delete runs CNI DEL for the pod (its namespace stays until the test
// ends).
func (p *Pod) Delete() error {
	cni := p.Node.cniConf()
	return p.Node.inNode(func() error { return cni.cfg.DelNetworkList(context.Background(), cni.list, p.rt) })
}

// inNode runs f on a thread inside the node's namespace: libcni execs the
// plugin from there, as a runtime execs it in the host's.
func (n *Node) inNode(f func() error) error {
	var err error
	if derr := n.Do(func(ns.NetNS) error { err = f(); return nil }); derr != nil {
		return derr
	}
	return err
}
