package vmtest

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/internal/vmtest/guest"
)

// CalicoNodeEnv is calico-node's environment on a VM node, as a
// calico-node DaemonSet sets it: the node's name, the cluster's backend
// (vxlan by default: no BIRD, felix programs the encapsulated routes;
// bird: BIRD and confd too), the address autodetected on the underlay,
// the datastore over the segment. Every path is Calico's default: each
// VM has its own file system.
func (n *Node) CalicoNodeEnv() []string {
	return CalicoNodeEnv(n.Name, n.c.Backend, n.c.EtcdEndpoint)
}

// CalicoNodeEnv is calico-node's environment for node name on a VM with
// the given CALICO_NETWORKING_BACKEND (bird also sets CLUSTER_TYPE
// k8s,bgp), reaching etcd at endpoint.
func CalicoNodeEnv(name, backend, endpoint string) []string {
	clusterType := "k8s"
	if backend == "bird" {
		clusterType = "k8s,bgp"
	}
	return []string{
		"NODENAME=" + name,
		"CALICO_NETWORKING_BACKEND=" + backend,
		"CLUSTER_TYPE=" + clusterType,
		"IP=autodetect",
		"IP_AUTODETECTION_METHOD=cidr=172.30.0.0/16",
		"NO_DEFAULT_POOLS=true",
		"CALICO_MANAGE_CNI=false",
		"FELIX_HEALTHENABLED=true",
		"FELIX_IPV6SUPPORT=false",
		"FELIX_LOGSEVERITYSCREEN=Info",
		"CALICO_DISABLE_FILE_LOGGING=true",
		"DATASTORE_TYPE=etcdv3",
		"ETCD_ENDPOINTS=" + endpoint,
	}
}

// StartCalicoNode runs calico-node on every node and waits until each
// passes its readiness probe (`calico-node -felix-ready`, as the kubelet
// runs it), failing the test after 4 minutes.
func (c *Cluster) StartCalicoNode() {
	c.t.Helper()
	start := time.Now()
	for _, n := range c.Nodes {
		if err := n.Spawn("calico-node", n.CalicoNodeEnv(), "calico-node"); err != nil {
			c.t.Fatalf("starting calico-node on %s: %v", n.Name, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	errs := make([]error, len(c.Nodes))
	var wg sync.WaitGroup
	for i, n := range c.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var last string
			errs[i] = n.VM.waitFor(ctx, 2*time.Second, func() bool {
				var r guest.ExecResult
				err := n.Guest.CallTimeout(time.Minute, "/exec", guest.ExecRequest{Argv: []string{"calico-node", "-felix-ready"}, Env: n.CalicoNodeEnv()}, &r)
				last = strings.TrimSpace(r.Output)
				return err == nil && r.Code == 0
			})
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%w (last probe: %s)", errs[i], last)
			}
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			c.t.Fatalf("calico-node on %s not ready: %v", c.Nodes[i].Name, err)
		}
	}
	c.t.Logf("calico-node ready on %d VMs in %v", len(c.Nodes), time.Since(start).Round(time.Millisecond))
}
