package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tabbynet/tabby/internal/vmtest"
)

// VM nodes (Options.VMNodes, `tabby-lab cluster up --vm-nodes N`): nodes
// that are qemu VMs booting Debian's own kernel (internal/vmtest's image,
// with containerd and runc), for what this machine's kernel lacks (SCTP).
// Each VM's NIC is a tap on the control plane's br0, so the VM is
// 10.77.0.<100+i> on the underlay with the control plane as its router,
// as a namespace node is. qemu is a marked process of the cluster (Down
// kills it; nothing else of the VM outlives it); the guest's disk is the
// cached image with snapshot=on, so nothing the VM writes stays.
//
// The VM sees the host's folders it needs at the same paths: the state
// folder (its 9p "share", bind-mounted there), the Kubernetes binaries,
// Tabby's binaries and the image tarball's folder (read-only 9p mounts),
// so the kubeconfigs, the containerd configuration and the image paths
// are the namespace nodes' own. The guest's run script (vmRunScript)
// sets the network up, starts containerd, imports the images once per
// boot, then runs kubelet and kube-proxy; calico-node comes as on every
// node, from the DaemonSet.

// VMNodeLabel is set (to "true") on every VM node by its kubelet.
const VMNodeLabel = "tabby.lab/vm-node"

// VMNodeState is one VM node as planned.
type VMNodeState struct {
	Name string `json:"name"`
	ID   int    `json:"id"`   // tabby.id on the guest's command line
	Addr string `json:"addr"` // ens3's address with prefix length
	Dir  string `json:"dir"`  // its files and logs, under the state folder
}

// vmReadyTimeout bounds Up's wait for a cluster with VM nodes: their boot
// and image imports run under TCG.
const vmReadyTimeout = 20 * time.Minute

// vmNodeMemMiB is each VM's memory: containerd, kubelet, kube-proxy,
// calico-node and a test's pods (the SCTP specs run 9 agnhost pods).
const vmNodeMemMiB = 3072

// planVMNodes names and addresses n VM nodes: vm-1.. on subnet 0 at
// 10.77.0.101.. (the namespace nodes start at .11).
func planVMNodes(dir string, n int) []VMNodeState {
	out := make([]VMNodeState, n)
	for i := range out {
		name := fmt.Sprintf("vm-%d", i+1)
		out[i] = VMNodeState{Name: name, ID: i + 1, Addr: fmt.Sprintf(underlayFmt+"/24", 0, 101+i),
			Dir: filepath.Join(dir, "vms", name)}
	}
	return out
}

// nodeNames are the names of every node, namespace and VM ones.
func (s *State) nodeNames() []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Name)
	}
	for _, v := range s.VMNodes {
		out = append(out, v.Name)
	}
	return out
}

// vmShare is one host folder the guest mounts at the same path.
type vmShare struct{ tag, path string }

// vmShares are the folders a VM node mounts besides the state folder
// (the init's "share"): the Kubernetes binaries, Tabby's binaries and
// the folder of each image tarball, each once.
func vmShares(kubeBin, bin string, tars []string) []vmShare {
	paths := []string{kubeBin, bin}
	for _, t := range tars {
		paths = append(paths, filepath.Dir(t))
	}
	var out []vmShare
	var seen []string
	for _, p := range paths {
		if slices.Contains(seen, p) {
			continue
		}
		seen = append(seen, p)
		out = append(out, vmShare{tag: fmt.Sprintf("h%d", len(out)), path: p})
	}
	return out
}

// vmNodeEnv is the VM node's node.env, read by the run script.
func vmNodeEnv(v VMNodeState, stateDir, kubeBin, bin string, shares []vmShare, tars []string) string {
	var sh []string
	for _, s := range shares {
		sh = append(sh, s.tag+"="+s.path)
	}
	return fmt.Sprintf("NAME=%s\nADDR=%s\nGW=%s\nSTATE=%s\nDIR=%s\nKUBEBIN=%s\nBIN=%s\nSHARES='%s'\nTARS='%s'\n",
		v.Name, v.Addr, gateway(0), stateDir, v.Dir, kubeBin, bin, strings.Join(sh, " "), strings.Join(tars, " "))
}

// vmRunScript is the guest's whole life (hack/build-vm-image.sh's init
// runs /mnt/share/run.sh <id>): the node's network, the host's folders,
// containerd with the images imported, then kubelet and kube-proxy, each
// step's time printed (the share's out-<id>.log).
const vmRunScript = `#!/bin/sh
# lab/cluster VM node: network, shares, containerd, images, kubelet, kube-proxy.
set -e
. /mnt/share/vms/vm-$1/node.env
t0=$(cut -d' ' -f1 /proc/uptime)
say() { echo "$(cut -d' ' -f1 /proc/uptime)s $*"; }
say "run.sh started (boot $t0 s)"
hostname "$NAME"
printf '127.0.0.1 localhost\n%s %s\n' "${ADDR%/*}" "$NAME" >/etc/hosts
ip link set ens3 up
ip addr add "$ADDR" dev ens3
ip route add default via "$GW"
mkdir -p "$STATE"
mount --bind /mnt/share "$STATE"
for s in $SHARES; do
	mkdir -p "${s#*=}"
	mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576,ro "${s%%=*}" "${s#*=}"
done
echo 1 >/proc/sys/net/ipv4/ip_forward
modprobe sctp
modprobe overlay
modprobe br_netfilter || true
echo '+cpuset +cpu +io +memory +pids' >/sys/fs/cgroup/cgroup.subtree_control || true
mkdir -p /opt/cni/bin /etc/cni/net.d /var/lib/kubelet /var/log/pods
cp "$BIN/loopback" /opt/cni/bin/
cp "$KUBEBIN/kubelet" "$KUBEBIN/kube-proxy" /usr/local/bin/
say "network and shares ready"
containerd --config "$STATE/containerd.toml" >"$DIR/containerd.log" 2>&1 &
until ctr version >/dev/null 2>&1; do sleep 0.5; done
say "containerd answering"
for t in $TARS; do
	ctr -n k8s.io images import "$t" >/dev/null
	say "imported $(basename "$t")"
done
say "images imported"
/usr/local/bin/kubelet --config="$DIR/kubelet.yaml" --kubeconfig="$DIR/kubelet.kubeconfig" \
	--hostname-override="$NAME" --node-ip="${ADDR%/*}" --node-labels=` + VMNodeLabel + `=true >"$DIR/kubelet.log" 2>&1 &
/usr/local/bin/kube-proxy --config="$DIR/kube-proxy.yaml" >"$DIR/kube-proxy.log" 2>&1 &
say "kubelet and kube-proxy started"
wait
`

// bootVMNodes writes each VM node's files and starts its qemu in the
// control plane's namespace, a tap on br0 as its NIC. It returns once the
// VMs are started; WaitReady sees them join.
func (c *Cluster) bootVMNodes(ctx context.Context, tars []string, caFile string, tok tokens) error {
	server := fmt.Sprintf("https://%s:%d", cpAddr, apiPort)
	img, err := vmtest.EnsureImage(ctx)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(c.Dir, "run.sh"), []byte(vmRunScript), 0o755); err != nil {
		return err
	}
	shares := vmShares(c.KubeBin, c.Bin, tars)
	for _, v := range c.State.VMNodes {
		if err := c.writeVMNodeFiles(v, shares, tars, server, caFile, tok); err != nil {
			return err
		}
		if err := c.startVM(img, v, shares); err != nil {
			return err
		}
	}
	return nil
}

// writeVMNodeFiles writes node.env, kubelet's and kube-proxy's
// configurations and kubeconfigs into the VM node's folder.
func (c *Cluster) writeVMNodeFiles(v VMNodeState, shares []vmShare, tars []string, server, caFile string, tok tokens) error {
	if err := os.MkdirAll(v.Dir, 0o755); err != nil {
		return err
	}
	n := NodeState{Name: v.Name, Addr: v.Addr}
	files := map[string]string{
		"node.env":           vmNodeEnv(v, c.Dir, c.KubeBin, c.Bin, shares, tars),
		"kubelet.yaml":       c.kubeletConfigFor(n, "/"),
		"kubelet.kubeconfig": kubeconfig(server, caFile, tok.Nodes[v.Name]),
		"proxy.kubeconfig":   kubeconfig(server, caFile, tok.Proxy),
		"kube-proxy.yaml":    kubeProxyConfig(n, filepath.Join(v.Dir, "proxy.kubeconfig")),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(v.Dir, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// startVM starts VM node v's qemu, a marked process of the cluster, in
// the control plane's namespace with tap vm<id> on br0.
func (c *Cluster) startVM(img vmtest.Image, v VMNodeState, shares []vmShare) error {
	tap := fmt.Sprintf("vmtap%d", v.ID)
	seg := &vmtest.Segment{Netns: c.cpNetns()}
	for _, args := range [][]string{{"tuntap", "add", tap, "mode", "tap"}, {"link", "set", tap, "master", "br0", "up"}} {
		if err := ipn(c.cpNetns(), args...); err != nil {
			return err
		}
	}
	argv, err := vmtest.VMConfig{Image: img, ID: v.ID, Segment: seg, Tap: tap, MAC: vmMAC(v.ID), Share: c.Dir,
		MemMiB: vmNodeMemMiB, CPUs: 2}.Command()
	if err != nil {
		return err
	}
	for _, s := range shares {
		argv = append(argv, "-virtfs", "local,path="+s.path+",mount_tag="+s.tag+",security_model=none,readonly=on")
	}
	_, err = c.spawn("qemu-"+v.Name, argv...)
	return err
}

// vmMAC is VM node id's NIC address.
func vmMAC(id int) string { return fmt.Sprintf("52:54:00:77:01:%02x", id) }
