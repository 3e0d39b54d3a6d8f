package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// poolEnv is the calico-node environment a user sets for each pool mode
// (Calico's CALICO_IPV4POOL_* variables; the manifest's default is IPIP,
// which this machine's kernel lacks).
var poolEnv = map[string][]string{
	"vxlan":             {"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=Always"},
	"vxlan-crosssubnet": {"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=CrossSubnet"},
	"bgp":               {"CALICO_IPV4POOL_IPIP=Never", "CALICO_IPV4POOL_VXLAN=Never"},
}

// Kubectl runs the cluster's kubectl as the admin and returns its output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.KubeBin, "kubectl"), append([]string{"--kubeconfig", c.State.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// install applies the manifest as a user would, then sets what a user
// sets: the pool mode on the DaemonSet and, for etcd, the endpoints in
// calico-config. It runs before the kubelets start, so the first
// calico-node already has them.
func (c *Cluster) install(ctx context.Context, o Options) error {
	env, ok := poolEnv[o.PoolMode]
	if !ok {
		return fmt.Errorf("pool mode %q: use vxlan, vxlan-crosssubnet or bgp", o.PoolMode)
	}
	img, err := manifestImage(o.Manifest)
	if err != nil {
		return err
	}
	c.State.Image = img
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-f", o.Manifest); err != nil {
		return err
	}
	// The manifest's veth_mtu is Calico's "0": felix detects the MTU.
	data := map[string]string{}
	if o.Datastore == DatastoreEtcd {
		data["etcd_endpoints"] = fmt.Sprintf("http://%s:%d", cpAddr, etcdPort)
	}
	if len(data) > 0 {
		patch, err := json.Marshal(map[string]any{"data": data})
		if err != nil {
			return err
		}
		if _, err := c.Kubectl(ctx, "-n", "kube-system", "patch", "configmap", "calico-config", "--type", "merge", "-p", string(patch)); err != nil {
			return err
		}
	}
	if _, err = c.Kubectl(ctx, append([]string{"-n", "kube-system", "set", "env", "daemonset/calico-node", "-c", "calico-node"}, env...)...); err != nil {
		return err
	}
	if o.DNS {
		return c.installDNS(ctx)
	}
	return nil
}

var imageLine = regexp.MustCompile(`(?m)^\s+image:\s*(\S+)`)

// manifestImage is the Tabby image the manifest names.
func manifestImage(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	m := imageLine.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("%s names no image", path)
	}
	return string(m[1]), nil
}

// Client is a clientset for the cluster, as the admin.
func (c *Cluster) Client() (kubernetes.Interface, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.State.Kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 100, 200
	return kubernetes.NewForConfig(rc)
}

// WaitReady waits until every node is Ready, the calico-node DaemonSet
// has a ready, up-to-date pod on each and calico-kube-controllers (and
// with the DNS, coredns) is available.
func (c *Cluster) WaitReady(ctx context.Context, timeout time.Duration) error {
	kc, err := c.Client()
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	var last string
	for {
		last = c.readiness(ctx, kc)
		if last == "" {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("not ready after %s: %s", timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// readiness is "" when the cluster is ready, else what is not.
func (c *Cluster) readiness(ctx context.Context, kc kubernetes.Interface) string {
	nodes, err := kc.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	ready := 0
	for _, n := range nodes.Items {
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	all := len(c.State.nodeNames())
	if ready != all {
		return fmt.Sprintf("%d of %d nodes Ready", ready, all)
	}
	ds, err := kc.AppsV1().DaemonSets("kube-system").Get(ctx, "calico-node", metav1.GetOptions{})
	if err != nil {
		return err.Error()
	}
	if !daemonSetDone(ds, all) {
		return fmt.Sprintf("calico-node: %d of %d ready, %d updated", ds.Status.NumberReady, all, ds.Status.UpdatedNumberScheduled)
	}
	deployments := []string{"calico-kube-controllers"}
	if c.State.DNS {
		deployments = append(deployments, "coredns")
	}
	for _, name := range deployments {
		d, err := kc.AppsV1().Deployments("kube-system").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err.Error()
		}
		if d.Status.AvailableReplicas < 1 || d.Status.ObservedGeneration < d.Generation {
			return name + " not available"
		}
	}
	return ""
}

// daemonSetDone: its latest spec is rolled out and ready on every node.
func daemonSetDone(ds *appsv1.DaemonSet, nodes int) bool {
	s := ds.Status
	return s.ObservedGeneration >= ds.Generation && int(s.NumberReady) == nodes &&
		int(s.UpdatedNumberScheduled) == nodes && int(s.NumberAvailable) == nodes
}
