package cluster

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
)

// PodNetns opens the network namespace of a running pod, found through
// its containers' processes in the pod's cgroup (kubelet's cgroupfs
// layout: <cgroupRoot>/kubepods[/<qos>]/pod<uid>/<container>). The
// caller closes it.
func (c *Cluster) PodNetns(p *corev1.Pod) (ns.NetNS, error) {
	var node *NodeState
	for i := range c.State.Nodes {
		if c.State.Nodes[i].Name == p.Spec.NodeName {
			node = &c.State.Nodes[i]
		}
	}
	if node == nil {
		return nil, fmt.Errorf("pod %s/%s: node %q is not the cluster's", p.Namespace, p.Name, p.Spec.NodeName)
	}
	base := filepath.Join("/sys/fs/cgroup/pids", c.cgroupRoot(*node), "kubepods")
	var found string
	_ = filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
		if err != nil || found != "" || !d.IsDir() || d.Name() != "pod"+string(p.UID) {
			return nil
		}
		ents, _ := os.ReadDir(path)
		for _, e := range ents {
			b, _ := os.ReadFile(filepath.Join(path, e.Name(), "cgroup.procs"))
			if f := strings.Fields(string(b)); len(f) > 0 {
				found = "/proc/" + f[0] + "/ns/net"
				break
			}
		}
		return filepath.SkipAll
	})
	if found == "" {
		return nil, fmt.Errorf("pod %s/%s: no process found under %s", p.Namespace, p.Name, base)
	}
	return ns.GetNS(found)
}

// Dial opens a TCP connection to addr from inside the network namespace
// netns (a pod's): the socket lives there, so the connection takes the
// pod's path through its node.
func Dial(ctx context.Context, netns ns.NetNS, addr string, timeout time.Duration) (net.Conn, error) {
	var conn net.Conn
	err := netns.Do(func(ns.NetNS) error {
		var err error
		d := net.Dialer{Timeout: timeout}
		conn, err = d.DialContext(ctx, "tcp", addr)
		return err
	})
	return conn, err
}
