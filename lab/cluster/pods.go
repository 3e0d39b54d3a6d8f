package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// PodNetns opens the network namespace of a running pod, found through
// its containers' processes in the pod's cgroup (kubelet's cgroupfs
// layout: <cgroupRoot>/kubepods[/<qos>]/pod<uid>/<container>). The
// caller closes it.
func (c *Cluster) PodNetns(p *corev1.Pod) (ns.NetNS, error) {
	// Only the node's name is read: a power-on rewrites the node's Holder
	// while the chaos observer's probes call this.
	known := false
	for i := range c.State.Nodes {
		known = known || c.State.Nodes[i].Name == p.Spec.NodeName
	}
	if !known {
		return nil, fmt.Errorf("pod %s/%s: node %q is not the cluster's", p.Namespace, p.Name, p.Spec.NodeName)
	}
	base := filepath.Join("/sys/fs/cgroup/pids", c.cgroupRootOf(p.Spec.NodeName), "kubepods")
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

// agnPod is an agnhost netexec pod (HTTP on 8080) that the scheduler
// places on node.
func agnPod(ns, name, node string, labels map[string]string) *corev1.Pod {
	zero := int64(0)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels},
		Spec: corev1.PodSpec{
			NodeSelector:                  map[string]string{"kubernetes.io/hostname": node},
			TerminationGracePeriodSeconds: &zero,
			Containers: []corev1.Container{{
				Name: "agnhost", Image: AgnhostImage, ImagePullPolicy: corev1.PullNever,
				Args: []string{"netexec", "--http-port=8080", "--udp-port=-1"},
			}},
		},
	}
}

// waitRunning waits for the pod to run with an IP.
func waitRunning(ctx context.Context, kc kubernetes.Interface, ns, name string, timeout time.Duration) (*corev1.Pod, error) {
	deadline := time.Now().Add(timeout)
	for {
		p, err := kc.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
			return p, nil
		}
		if time.Now().After(deadline) {
			if err == nil {
				err = fmt.Errorf("phase %s, ip %q, %v", p.Status.Phase, p.Status.PodIP, p.Status.ContainerStatuses)
			}
			return nil, fmt.Errorf("pod %s/%s not running after %s: %w", ns, name, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// hostnameFrom asks server's netexec for its hostname from inside
// client's network namespace; "" and the error when it cannot.
func (c *Cluster) hostnameFrom(ctx context.Context, client, server *corev1.Pod, timeout time.Duration) (string, error) {
	netns, err := c.PodNetns(client)
	if err != nil {
		return "", err
	}
	defer netns.Close()
	conn, err := Dial(ctx, netns, net.JoinHostPort(server.Status.PodIP, "8080"), timeout)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return httpGet(conn, "/hostname", timeout)
}

// httpGet sends one GET on conn (kept open) and returns the body.
func httpGet(conn net.Conn, path string, timeout time.Duration) (string, error) {
	_, body, err := httpDo(conn, path, timeout)
	return body, err
}

// httpDo sends one GET on conn (kept open) and returns the status code
// and the body.
func httpDo(conn net.Conn, path string, timeout time.Duration) (int, string, error) {
	_ = conn.SetDeadline(time.Now().Add(timeout))
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		return 0, "", err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b)), err
}
