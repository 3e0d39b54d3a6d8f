package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// nodeMounts are the node's private folders: each <node dir>/<key> is
// bind-mounted on the path, in the node's mount namespace only, so
// containerd, kubelet and the DaemonSet's hostPath volumes use the node's
// own (the host keeps at most an empty mount point).
var nodeMounts = []struct{ dir, path string }{
	{"var-lib", "/var/lib"},
	{"var-log", "/var/log"},
	{"run-containerd", "/run/containerd"},
	{"run-calico", "/run/calico"},
	{"etc-cni-net.d", "/etc/cni/net.d"},
	{"opt-cni-bin", "/opt/cni/bin"},
	// calico-node mounts /lib/modules; this machine has none.
	{"lib-modules", "/lib/modules"},
}

// nodeFiles are files bind-mounted over the host's, with their content:
// kubelet checks and would write these kernel settings, global to the
// machine; the node gets its own copies holding the values kubelet wants.
var nodeFiles = []struct{ name, path, content string }{
	{"overcommit_memory", "/proc/sys/vm/overcommit_memory", "1\n"},
	{"panic", "/proc/sys/kernel/panic", "10\n"},
	{"panic_on_oops", "/proc/sys/kernel/panic_on_oops", "1\n"},
	{"xtables.lock", "/run/xtables.lock", ""},
}

// inNode prefixes argv to run in node n's network and mount namespaces
// (nsenter, never `ip netns exec`: that remounts /sys and hides the
// cgroup mounts from runc).
func inNode(n NodeState, argv ...string) []string {
	p := fmt.Sprintf("/proc/%d/ns/", n.Holder)
	return append([]string{"nsenter", "--mount=" + p + "mnt", "--net=" + p + "net", "--"}, argv...)
}

// startHolder starts the process holding node n's private mount namespace
// (inside its network namespace) and returns its PID once the namespace
// is its own.
func (c *Cluster) startHolder(n NodeState) (int, error) {
	p, err := c.spawn("holder-"+n.Name, "nsenter", "--net="+netnsPath(n.Netns), "--",
		"unshare", "--mount", "--propagation", "private", "sleep", "infinity")
	if err != nil {
		return 0, err
	}
	self, _ := os.Readlink("/proc/self/ns/mnt")
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if m, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", p.Pid)); err == nil && m != self {
			return p.Pid, nil
		}
	}
	return 0, fmt.Errorf("node %s: the mount namespace holder did not start: %s", n.Name, c.logTail("holder-"+n.Name))
}

// mountNode makes node n's private folders and files and mounts them in
// its mount namespace.
func mountNode(n NodeState) error {
	var script bytes.Buffer
	script.WriteString("set -e\n")
	for _, m := range nodeMounts {
		src := filepath.Join(n.Dir, m.dir)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(&script, "mkdir -p %s\nmount --bind %s %s\n", m.path, src, m.path)
	}
	for _, f := range nodeFiles {
		src := filepath.Join(n.Dir, "files", f.name)
		if err := os.MkdirAll(filepath.Dir(src), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(src, []byte(f.content), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&script, "[ -e %[1]s ] || touch %[1]s\nmount --bind %s %[1]s\n", f.path, src)
	}
	if _, err := run(inNode(n, "sh", "-c", script.String())...); err != nil {
		return fmt.Errorf("node %s: mounts: %w", n.Name, err)
	}
	return nil
}

// cgroupRoot is node n's kubelet cgroupRoot.
func (c *Cluster) cgroupRoot(n NodeState) string { return c.cgroupRootOf(n.Name) }

// cgroupRootOf is the cgroup folder of the node named name.
func (c *Cluster) cgroupRootOf(name string) string { return "/" + c.State.Prefix + "-" + name }

// makeCgroups creates the node's cgroup in every v1 hierarchy (cpuset
// given its parent's CPUs and memory nodes, which a new cpuset lacks).
func (c *Cluster) makeCgroups(n NodeState) error {
	hs, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hs {
		if h.Name() == "unified" {
			continue
		}
		dir := filepath.Join("/sys/fs/cgroup", h.Name(), c.cgroupRoot(n))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("node %s: cgroup: %w", n.Name, err)
		}
		if h.Name() != "cpuset" {
			continue
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			b, err := os.ReadFile(filepath.Join("/sys/fs/cgroup/cpuset", f))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, f), bytes.TrimSpace(b), 0o644)
			}
			if err != nil {
				return fmt.Errorf("node %s: %s: %w", n.Name, f, err)
			}
		}
	}
	return nil
}

// clusterCgroups lists the cgroup folders of the cluster with prefix, in
// every hierarchy.
func clusterCgroups(prefix string) []string {
	var out []string
	hs, _ := os.ReadDir("/sys/fs/cgroup")
	for _, h := range hs {
		ents, _ := os.ReadDir(filepath.Join("/sys/fs/cgroup", h.Name()))
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), prefix+"-") {
				out = append(out, filepath.Join("/sys/fs/cgroup", h.Name(), e.Name()))
			}
		}
	}
	return out
}

// containerdConfig is every node's containerd configuration: the default
// paths, which each node's mounts make its own.
func (c *Cluster) containerdConfig() string {
	return `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"
[grpc]
  address = "/run/containerd/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "` + pauseImage + `"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  disable_apparmor = true
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/opt/cni/bin"
    conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
`
}

// startContainerd starts node n's containerd and waits for its socket.
func (c *Cluster) startContainerd(n NodeState) error {
	cfg := filepath.Join(c.Dir, "containerd.toml")
	if _, err := c.spawn("containerd-"+n.Name, inNode(n, "containerd", "--config", cfg)...); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if _, err := run(inNode(n, "ctr", "version")...); err == nil {
			return nil
		}
	}
	return fmt.Errorf("node %s: containerd does not answer: %s", n.Name, c.logTail("containerd-"+n.Name))
}
