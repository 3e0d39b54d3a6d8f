package cluster

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The chaos run's process-level faults: a node's power lost and
// restored, the datastore stopped and restarted, a kubelet restarted.

// nodeProcesses lists every process of node n: those in its mount
// namespace (the holder, containerd, kubelet, kube-proxy, shims) and in
// its cgroups (the containers).
func (c *Cluster) nodeProcesses(n NodeState) []int {
	mnt, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.Holder))
	seen := map[int]bool{}
	var out []int
	add := func(pid int) {
		if pid > 0 && pid != os.Getpid() && !seen[pid] {
			seen[pid] = true
			out = append(out, pid)
		}
	}
	if err == nil {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if m, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && m == mnt {
				add(pid)
			}
		}
	}
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", c.cgroupRoot(n)), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			pid, _ := strconv.Atoi(f)
			add(pid)
		}
		return nil
	})
	return out
}

// killNow SIGKILLs what list returns until it returns nothing (children
// forked meanwhile included), within timeout.
func killNow(list func() []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := list()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v still alive after SIGKILL", pids)
		}
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// PowerOff is node n losing its power: every process of the node,
// kubelet, containerd, kube-proxy, the shims, the pods and the agent,
// SIGKILLed at once, then what lives in memory on a real host gone: the
// node's mount namespace (with the pods' network namespace mounts, so
// the pods' namespaces and veths go) and its run folders. Its network
// namespace (eth0, routes, rules) and disk stay, as a rebooted host's
// configuration and disk do.
func (c *Cluster) PowerOff(n NodeState) error {
	mnt, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", n.Holder))
	for _, p := range c.nodeProcesses(n) {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if err := killNow(func() []int { return c.nodeProcesses(n) }, 20*time.Second); err != nil {
		return fmt.Errorf("node %s: %w", n.Name, err)
	}
	// The mount namespace dies with its last process; an nsenter of ours
	// may still be in it for a moment.
	if err := killNow(func() []int { return inMountNS(mnt) }, 10*time.Second); err != nil {
		return fmt.Errorf("node %s: mount namespace: %w", n.Name, err)
	}
	// What a reboot empties (tmpfs on a real host): containerd's and
	// calico's run state. /var/lib (containerd's images and metadata,
	// kubelet's, calico's nodename) is the disk and stays.
	for _, d := range []string{"run-containerd", "run-calico"} {
		dir := filepath.Join(n.Dir, d)
		ents, _ := os.ReadDir(dir)
		for _, e := range ents {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return fmt.Errorf("node %s: wiping %s: %w", n.Name, dir, err)
			}
		}
	}
	return nil
}

// inMountNS lists the processes in mount namespace mnt ("mnt:[ino]").
func inMountNS(mnt string) []int {
	if mnt == "" {
		return nil
	}
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if m, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/mnt", pid)); err == nil && m == mnt {
			out = append(out, pid)
		}
	}
	return out
}

// PowerOn boots node i again as its host would: a fresh mount namespace
// with the node's folders, containerd (its images and metadata from
// disk), kubelet and kube-proxy. The new holder is saved in the state.
func (c *Cluster) PowerOn(i int) error {
	n := &c.State.Nodes[i]
	holder, err := c.startHolder(*n)
	if err != nil {
		return err
	}
	n.Holder = holder
	if err := c.State.save(c.Dir); err != nil {
		return err
	}
	if err := mountNode(*n); err != nil {
		return err
	}
	if err := c.makeCgroups(*n); err != nil {
		return err
	}
	if err := c.startContainerd(*n); err != nil {
		return err
	}
	if err := c.spawnKubelet(*n); err != nil {
		return err
	}
	return c.spawnKubeProxy(*n)
}

// markedCmd is a marked process of the cluster whose program is prog
// and whose arguments include arg ("" for any), with its command line.
func (c *Cluster) markedCmd(prog, arg string) (int, []string, error) {
	for _, pid := range markedProcesses(c.State.Prefix) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		argv := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
		if filepath.Base(argv[0]) != prog {
			continue
		}
		if arg == "" || strings.Contains(" "+strings.Join(argv[1:], " ")+" ", " "+arg+" ") {
			return pid, argv, nil
		}
	}
	return 0, nil, fmt.Errorf("no %s %s running in cluster %s", prog, arg, c.State.Prefix)
}

// StopDatastore SIGKILLs etcd and kube-apiserver (both: with the
// Kubernetes datastore the API server is Tabby's datastore, and it needs
// etcd) and returns what starts them again, with the same command lines.
func (c *Cluster) StopDatastore() (restart func() error, err error) {
	var argvs [][]string
	var pids []int
	for _, prog := range []string{"etcd", "kube-apiserver"} {
		pid, argv, err := c.markedCmd(prog, "")
		if err != nil {
			return nil, err
		}
		pids, argvs = append(pids, pid), append(argvs, argv)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	if err := killNow(func() []int { return alive(pids) }, 10*time.Second); err != nil {
		return nil, err
	}
	return func() error {
		for _, argv := range argvs {
			if _, err := c.spawn(filepath.Base(argv[0]), c.inCP(argv...)...); err != nil {
				return err
			}
		}
		return nil
	}, nil
}

// alive is the pids that still exist (and are not zombies).
func alive(pids []int) []int {
	var out []int
	for _, p := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err == nil && !strings.Contains(string(b), ") Z ") {
			out = append(out, p)
		}
	}
	return out
}

// RestartKubelet stops node n's kubelet (SIGTERM, as a service manager
// does) and starts it again: a deleted Node registers itself anew.
func (c *Cluster) RestartKubelet(n NodeState) error {
	pid, _, err := c.markedCmd("kubelet", "--hostname-override="+n.Name)
	if err != nil {
		return err
	}
	_ = syscall.Kill(pid, syscall.SIGTERM)
	deadline := time.Now().Add(15 * time.Second)
	for len(alive([]int{pid})) > 0 {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return c.spawnKubelet(n)
}

// KillContainer SIGKILLs a container's main process on node n, found
// through containerd (`ctr tasks ls`) by the container ID a pod's status
// shows (containerd://<id>).
func (c *Cluster) KillContainer(n NodeState, containerID string) error {
	id := strings.TrimPrefix(containerID, "containerd://")
	out, err := run(inNode(n, "ctr", "-n", "k8s.io", "tasks", "ls")...)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && f[0] == id {
			pid, err := strconv.Atoi(f[1])
			if err != nil {
				return fmt.Errorf("ctr tasks ls: %q", line)
			}
			return syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	return fmt.Errorf("node %s: no task %s in ctr tasks ls:\n%s", n.Name, id, out)
}
