package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/lab"
)

// The lab's verbs that make sense on a real cluster: apply/delete (a
// file of Calico v3 resources and Kubernetes NetworkPolicies, waiting
// until every node's felix reports them programmed) run the lab's own
// code over the cluster's nodes and datastore; probe connects between the
// cluster's pods (any TCP server: they are the user's, not the lab's).

// Lab is the cluster as the lab's apply and delete see it: its datastore
// (with etcd, Kubernetes NetworkPolicies still go through the API and
// kube-controllers stores them), its nodes' namespaces (calico-node runs
// in each, its felix report on the node's loopback) and calicoctl from
// Bin.
func (c *Cluster) Lab(out io.Writer) *lab.Lab {
	s := &lab.State{Prefix: c.State.Prefix, Phase: c.State.Phase, Datastore: lab.DatastoreKubernetes,
		APIServer: c.State.APIServer, Kubeconfig: c.State.Kubeconfig, KubeControllers: true}
	if c.State.Datastore == DatastoreEtcd {
		s.Datastore, s.EtcdURL = lab.DatastoreEtcd, c.State.Etcd
	}
	for _, n := range c.State.Nodes {
		s.Nodes = append(s.Nodes, lab.NodeState{Name: n.Name, Netns: n.Netns, Subnet: n.Subnet, Addr: n.Addr, Dir: n.Dir})
	}
	return &lab.Lab{Dir: c.Dir, Bin: c.Bin, State: s, Out: out}
}

// Probe connects from every running pod (on the pod network) of the
// namespaces to every other one on TCP port, all at once, each within
// timeout: allowed when the target's kernel completes the handshake. A
// refusal (nothing listens there) is reported as denied with "refused":
// policy drops, it does not refuse.
func (c *Cluster) Probe(ctx context.Context, namespaces []string, port int, timeout time.Duration) ([]lab.ProbeResult, error) {
	pods, err := c.podsOf(ctx, namespaces)
	if err != nil {
		return nil, err
	}
	if len(pods) < 2 {
		return nil, fmt.Errorf("%d running pods in %v: nothing to probe", len(pods), namespaces)
	}
	nss := make([]ns.NetNS, len(pods))
	for i, p := range pods {
		if nss[i], err = c.PodNetns(p); err != nil {
			return nil, err
		}
		defer nss[i].Close()
	}
	var res []lab.ProbeResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, from := range pods {
		for _, to := range pods {
			if from == to {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := lab.ProbeResult{From: key(from), To: key(to), Port: "tcp/" + strconv.Itoa(port)}
				conn, err := Dial(ctx, nss[i], net.JoinHostPort(to.Status.PodIP, strconv.Itoa(port)), timeout)
				if err == nil {
					conn.Close()
					r.Allowed = true
				} else if r.Detail = "timeout"; strings.Contains(err.Error(), "refused") {
					r.Detail = "refused"
				}
				mu.Lock()
				res = append(res, r)
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	slices.SortFunc(res, func(a, b lab.ProbeResult) int { return strings.Compare(a.From+" "+a.To, b.From+" "+b.To) })
	return res, nil
}

func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// podsOf lists the running pods with an address of their own (not in
// the host's network) in the namespaces.
func (c *Cluster) podsOf(ctx context.Context, namespaces []string) ([]*corev1.Pod, error) {
	kc, err := c.Client()
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, n := range namespaces {
		l, err := kc.CoreV1().Pods(n).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing the pods of %s: %w", n, err)
		}
		for i := range l.Items {
			p := &l.Items[i]
			if p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" && !p.Spec.HostNetwork {
				out = append(out, p)
			}
		}
	}
	return out, nil
}
