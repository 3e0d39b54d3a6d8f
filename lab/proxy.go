package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// nodeAPIAddr is where a node's namespace reaches the lab's API server:
// each node namespace has its own loopback, on which `tabby-lab proxy`
// listens. A real node reaches its API server over its network; the lab's
// is on the root namespace's loopback, which no node namespace can see.
const nodeAPIAddr = "127.0.0.1:6443"

// Proxy listens on listen inside each of the network namespaces (paths)
// and forwards every connection to `to`, dialled from this process's own
// namespace. No interface or route is added anywhere. It runs until ctx
// ends (`tabby-lab proxy`, one process per lab).
func Proxy(ctx context.Context, netnsPaths []string, listen, to string) error {
	var lns []net.Listener
	defer func() {
		for _, ln := range lns {
			ln.Close()
		}
	}()
	for _, p := range netnsPaths {
		n, err := ns.GetNS(p)
		if err != nil {
			return err
		}
		err = n.Do(func(ns.NetNS) error {
			ln, err := net.Listen("tcp", listen)
			if err == nil {
				lns = append(lns, ln)
			}
			return err
		})
		n.Close()
		if err != nil {
			return fmt.Errorf("listening on %s in %s: %w", listen, p, err)
		}
	}
	var wg sync.WaitGroup
	for _, ln := range lns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				in, err := ln.Accept()
				if err != nil {
					return
				}
				go forward(in, to)
			}
		}()
	}
	<-ctx.Done()
	for _, ln := range lns {
		ln.Close()
	}
	wg.Wait()
	return nil
}

func forward(in net.Conn, to string) {
	defer in.Close()
	out, err := net.DialTimeout("tcp", to, 5*time.Second)
	if err != nil {
		return
	}
	defer out.Close()
	go func() { _, _ = io.Copy(out, in) }()
	_, _ = io.Copy(in, out)
}

// startAPIProxy runs `tabby-lab proxy` for every node and waits until the
// first node reaches the API server through it.
func (l *Lab) startAPIProxy() error {
	args := []string{"proxy", "--listen", nodeAPIAddr, "--to", l.State.APIServer[len("https://"):]}
	for _, n := range l.State.Nodes {
		args = append(args, netnsPath(n.Netns))
	}
	if _, err := l.spawn("api-proxy", "", nil, append([]string{l.Bin + "/tabby-lab"}, args...)...); err != nil {
		return err
	}
	n, err := ns.GetNS(netnsPath(l.State.Nodes[0].Netns))
	if err != nil {
		return err
	}
	defer n.Close()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		var dialErr error
		_ = n.Do(func(ns.NetNS) error {
			c, err := net.DialTimeout("tcp", nodeAPIAddr, time.Second)
			if err == nil {
				c.Close()
			}
			dialErr = err
			return nil
		})
		if dialErr == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return errors.Join(fmt.Errorf("the API proxy does not answer in %s", l.State.Nodes[0].Netns), dialErr, errors.New(l.logTail("api-proxy")))
		}
	}
}

// nodeKubeconfig is node n's kubeconfig (calico-node's and the CNI
// plugin's, both inside the node's namespace): the API server through the
// lab's proxy there.
func nodeKubeconfig(n *NodeState) string { return filepath.Join(n.Dir, "calico-kubeconfig") }

// writeNodeKubeconfigs writes each node's kubeconfig: the lab's admin one
// with the server at nodeAPIAddr.
func (l *Lab) writeNodeKubeconfigs() error {
	kc, err := os.ReadFile(l.State.Kubeconfig)
	if err != nil {
		return err
	}
	for i := range l.State.Nodes {
		n := &l.State.Nodes[i]
		if err := os.WriteFile(nodeKubeconfig(n), []byte(strings.Replace(string(kc), l.State.APIServer, "https://"+nodeAPIAddr, 1)), 0o600); err != nil {
			return fmt.Errorf("kubeconfig of node %s: %w", n.Name, err)
		}
	}
	return nil
}
