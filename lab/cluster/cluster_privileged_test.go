//go:build privileged

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// TestPrivilegedCluster brings a real cluster up once (kubelet, containerd
// and kube-proxy on three nodes over two subnets, Tabby installed by
// kubectl apply with the Kubernetes datastore) and checks, on pods the
// scheduler places through the API: connectivity across nodes in each
// pool mode, a NetworkPolicy, natOutgoing, address release on delete, a
// DaemonSet image roll under a live TCP stream, and ClusterNetworkPolicies
// and services matches through tabby-lab's apply and probe.
func TestPrivilegedCluster(t *testing.T) {
	c := testCluster(t, Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "create", "namespace", "t"); err != nil {
		t.Fatal(err)
	}
	pods := createPods(t, ctx, kc,
		agnPod("t", "a1", "node-1", map[string]string{"app": "a"}),
		agnPod("t", "a2", "node-2", map[string]string{"app": "a"}),
		agnPod("t", "a3", "node-3", map[string]string{"app": "b"}))
	// VXLAN as installed, then CrossSubnet; BGP (no encapsulation) last:
	// node-3, alone on its subnet, is only reachable with VXLAN, and the
	// other checks use it.
	t.Run("vxlan", func(t *testing.T) { c.checkPoolMode(t, ctx, pods, "Always") })
	t.Run("vxlan-crosssubnet", func(t *testing.T) { c.checkPoolMode(t, ctx, pods, "CrossSubnet") })
	t.Run("networkpolicy", func(t *testing.T) { c.checkNetworkPolicy(t, ctx, pods) })
	t.Run("natoutgoing", func(t *testing.T) { c.checkNATOutgoing(t, ctx, pods[0]) })
	t.Run("delete-releases-address", func(t *testing.T) { c.checkDeleteReleases(t, ctx) })
	t.Run("roll-image", func(t *testing.T) { c.checkRoll(t, ctx, pods[0], pods[1]) })
	t.Run("tabby-lab-verbs", func(t *testing.T) { c.checkVerbs(t, ctx) })
	t.Run("cluster-netpol", func(t *testing.T) {
		c.policyPods(t, ctx)
		c.checkClusterPolicies(t, ctx)
		c.checkServicesMatch(t, ctx)
	})
	t.Run("bgp", func(t *testing.T) { c.checkPoolMode(t, ctx, pods, "Never") })
}

// checkPoolMode sets the default pool's vxlanMode, then checks every pod
// pair that the mode can carry (BGP without encapsulation only within a
// subnet: no router between the subnets speaks BGP) and, on node-1, the
// route to each other node's pods: through vxlan.calico or eth0.
func (c *Cluster) checkPoolMode(t *testing.T, ctx context.Context, pods []*corev1.Pod, vxlan string) {
	if _, err := c.calicoctl(ctx, "patch", "ippool", "default-ipv4-ippool", "-p", fmt.Sprintf(`{"spec":{"vxlanMode":%q}}`, vxlan)); err != nil {
		t.Fatal(err)
	}
	wantDev := map[string]string{ // node-1's route to the pods of...
		"Always":      "vxlan.calico vxlan.calico",
		"CrossSubnet": "eth0 vxlan.calico",
		"Never":       "eth0",
	}[vxlan]
	ips := []string{pods[1].Status.PodIP, pods[2].Status.PodIP}
	if vxlan == "Never" {
		ips = ips[:1]
	}
	got := ""
	deadline := time.Now().Add(30 * time.Second)
	for ; time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		if got = c.routeDevs(t, ips...); got == wantDev {
			break
		}
	}
	if got != wantDev {
		t.Fatalf("node-1's routes to node-2's and node-3's pods go through %q, want %q", got, wantDev)
	}
	pairs := [][2]int{{0, 1}, {1, 0}, {0, 2}, {2, 0}, {1, 2}}
	if vxlan == "Never" {
		pairs = pairs[:2]
	}
	for _, p := range pairs {
		// Retried: a pod Running may not listen yet.
		c.waitReach(t, ctx, pods[p[0]], pods[p[1]], true)
	}
}

// routeDevs is the devices of node-1's routes to the given addresses
// ("-" for none).
func (c *Cluster) routeDevs(t *testing.T, ips ...string) string {
	var devs []string
	for _, ip := range ips {
		out, err := run("ip", "-n", c.State.Nodes[0].Netns, "-o", "route", "get", ip)
		dev := "-"
		if f := strings.Fields(out); err == nil {
			for i := range f[:len(f)-1] {
				if f[i] == "dev" {
					dev = f[i+1]
				}
			}
		}
		devs = append(devs, dev)
	}
	return strings.Join(devs, " ")
}

// checkNetworkPolicy: a Kubernetes NetworkPolicy letting only app=a pods
// into app=a pods: a2 still reaches a1, a3 (app=b) no longer does; once
// deleted, a3 does again.
func (c *Cluster) checkNetworkPolicy(t *testing.T, ctx context.Context, pods []*corev1.Pod) {
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	a := metav1.LabelSelector{MatchLabels: map[string]string{"app": "a"}}
	np := &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: "only-a"},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: a, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: &a}}}}},
	}
	if _, err := kc.NetworkingV1().NetworkPolicies("t").Create(ctx, np, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReach(t, ctx, pods[2], pods[0], false)
	c.waitReach(t, ctx, pods[1], pods[0], true)
	if err := kc.NetworkingV1().NetworkPolicies("t").Delete(ctx, "only-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitReach(t, ctx, pods[2], pods[0], true)
}

// waitReach waits up to 20 s for from -> to's port 8080 to be allowed (or
// denied: every attempt fails within its 1 s timeout).
func (c *Cluster) waitReach(t *testing.T, ctx context.Context, from, to *corev1.Pod, allowed bool) {
	t.Helper()
	var name string
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		name, err = c.hostnameFrom(ctx, from, to, time.Second)
		if (err == nil && name == to.Name) == allowed {
			return
		}
	}
	t.Errorf("%s -> %s: want allowed=%v, got %q, %v", from.Name, to.Name, allowed, name, err)
}

// checkNATOutgoing: a server outside the cluster (agnhost netexec in the
// control plane's namespace, which has no route to the pods) sees a pod's
// connection from its node's address.
func (c *Cluster) checkNATOutgoing(t *testing.T, ctx context.Context, pod *corev1.Pod) {
	p, err := c.spawn("outside-server", c.inCP(filepath.Join(c.KubeBin, "agnhost"), "netexec", "--http-port=8081", "--udp-port=-1")...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = harness.KillAll([]int{p.Pid}, time.Second) }()
	netns, err := c.PodNetns(pod)
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	var got string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(200 * time.Millisecond) {
		var conn net.Conn
		if conn, err = Dial(ctx, netns, net.JoinHostPort(cpAddr, "8081"), time.Second); err != nil {
			continue
		}
		got, err = httpGet(conn, "/clientip", 2*time.Second)
		conn.Close()
		if err == nil {
			break
		}
	}
	want := netip.MustParsePrefix(c.State.Nodes[0].Addr).Addr().String()
	if host, _, _ := net.SplitHostPort(got); err != nil || host != want {
		t.Fatalf("the outside server saw %q (%v), want node-1's %s", got, err, want)
	}
}

// checkDeleteReleases: `kubectl delete pod` releases the pod's address in
// Calico IPAM.
func (c *Cluster) checkDeleteReleases(t *testing.T, ctx context.Context) {
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	p := createPods(t, ctx, kc, agnPod("t", "d1", "node-2", nil))[0]
	out, err := c.calicoctl(ctx, "ipam", "show", "--ip="+p.Status.PodIP)
	if err != nil || !strings.Contains(out, " is in use") {
		t.Fatalf("before delete, ipam show --ip=%s: %s %v", p.Status.PodIP, out, err)
	}
	if _, err := c.Kubectl(ctx, "-n", "t", "delete", "pod", "d1", "--wait=true"); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		out, err = c.calicoctl(ctx, "ipam", "show", "--ip="+p.Status.PodIP)
		if err == nil && strings.Contains(out, "is not currently assigned") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after delete, ipam show --ip=%s: %s %v", p.Status.PodIP, out, err)
		}
	}
}

// checkRoll rolls the calico-node DaemonSet to a new image tag (the same
// image, tagged anew in every node's containerd, as a user's upgrade
// pulls it) while a TCP stream runs from client (node-2) to server
// (node-1): one request every 100 ms on one connection, none may fail,
// and the stream goes on after every node runs the new tag.
func (c *Cluster) checkRoll(t *testing.T, ctx context.Context, server, client *corev1.Pod) {
	next, err := c.TagImage("roll-test")
	if err != nil {
		t.Fatal(err)
	}
	netns, err := c.PodNetns(client)
	if err != nil {
		t.Fatal(err)
	}
	defer netns.Close()
	conn, err := Dial(ctx, netns, net.JoinHostPort(server.Status.PodIP, "8080"), 3*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	stop, done := make(chan struct{}), make(chan error, 1)
	var sent int
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			case <-time.After(100 * time.Millisecond):
			}
			msg := fmt.Sprint(sent)
			got, err := httpGet(conn, "/echo?msg="+msg, 2*time.Second)
			if err != nil || got != msg {
				done <- fmt.Errorf("request %d on the stream: %q, %v", sent, got, err)
				return
			}
			sent++
		}
	}()
	rolled, err := c.RollAgents(ctx, next)
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second)
	close(stop)
	if err := <-done; err != nil {
		t.Fatalf("the stream broke during the roll: %v", err)
	}
	out, err := c.Kubectl(ctx, "-n", "kube-system", "get", "pods", "-l", "k8s-app=calico-node", "-o", "jsonpath={.items[*].spec.containers[0].image}")
	if err != nil || strings.Count(out, next) != len(c.State.Nodes) {
		t.Fatalf("calico-node images after the roll: %q %v", out, err)
	}
	t.Logf("rolled %d nodes to %s in %s; %d requests on one TCP connection, none failed", len(c.State.Nodes), next, rolled.Round(time.Second), sent)
}

// TestPrivilegedClusterEtcd is the same install with tabby-etcd.yaml:
// calico-node, the CNI plugin and calicoctl on etcd (the control plane's),
// kube-controllers syncing Kubernetes policies, namespaces, pods and
// nodes into it. Pods on different nodes (and subnets) reach each other,
// a NetworkPolicy (through kube-controllers) is enforced, a deleted
// pod's address is released, ClusterNetworkPolicies (mirrored by
// kube-controllers) are enforced as on the Kubernetes datastore and a
// services match is refused.
func TestPrivilegedClusterEtcd(t *testing.T) {
	c := testCluster(t, Options{Datastore: DatastoreEtcd, Manifest: filepath.Join(repoRoot(), "manifests", "tabby-etcd.yaml")})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	// tabby-etcd.yaml installs no CRDs: ClusterNetworkPolicies need
	// network-policy-api's (kube-controllers finds it within a minute).
	if _, err := c.Kubectl(ctx, "apply", "--server-side", "-f", filepath.Join(repoRoot(), "manifests", "crds", "policy.networking.k8s.io_clusternetworkpolicies.yaml")); err != nil {
		t.Fatal(err)
	}
	kc, err := c.Client()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Kubectl(ctx, "create", "namespace", "t"); err != nil {
		t.Fatal(err)
	}
	pods := createPods(t, ctx, kc,
		agnPod("t", "a1", "node-1", map[string]string{"app": "a"}),
		agnPod("t", "a2", "node-2", map[string]string{"app": "a"}),
		agnPod("t", "a3", "node-3", map[string]string{"app": "b"}))
	t.Run("vxlan", func(t *testing.T) { c.checkPoolMode(t, ctx, pods, "Always") })
	t.Run("networkpolicy", func(t *testing.T) { c.checkNetworkPolicy(t, ctx, pods) })
	t.Run("delete-releases-address", func(t *testing.T) { c.checkDeleteReleases(t, ctx) })
	t.Run("tabby-lab-verbs", func(t *testing.T) { c.checkVerbs(t, ctx) })
	t.Run("cluster-netpol", func(t *testing.T) {
		c.policyPods(t, ctx)
		c.waitMirroringCNPs(t, ctx)
		c.checkClusterPolicies(t, ctx)
		c.checkServicesRefused(t, ctx)
	})
}

// checkVerbs runs `tabby-lab cluster` env, status, apply, probe and
// delete as a user would, on the pods of namespace t (a1, a2 app=a; a3
// app=b): env points kubectl and calicoctl at the cluster, status shows
// the Ready nodes, a Calico policy applied (waiting for every node's
// felix) denies a3 -> a1 but not a2 -> a1, as probe shows, and once
// deleted a3 -> a1 is allowed again.
func (c *Cluster) checkVerbs(t *testing.T, ctx context.Context) {
	lab := func(args ...string) string {
		t.Helper()
		out, err := c.tabbyLab(ctx, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	env := lab("env")
	sh := exec.CommandContext(ctx, "sh", "-c", env+"kubectl get nodes -o name && calicoctl get nodes")
	sh.Env = append(sh.Environ(), "PATH="+c.Bin+":/usr/bin:/bin")
	if out, err := sh.CombinedOutput(); err != nil || strings.Count(string(out), "node-") != 2*len(c.State.Nodes) {
		t.Errorf("kubectl and calicoctl after eval of env:\n%s\n%s %v", env, out, err)
	}
	if st := lab("status"); strings.Count(st, " Ready ") != len(c.State.Nodes) || !strings.Contains(st, "calico-node-") {
		t.Errorf("status shows no %d Ready nodes and calico-node pods:\n%s", len(c.State.Nodes), st)
	}
	pol := filepath.Join(t.TempDir(), "deny-b.yaml")
	if err := os.WriteFile(pol, []byte(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: deny-b, namespace: t}
spec:
  selector: app == 'a'
  ingress: [{action: Deny, source: {selector: app == 'b'}}, {action: Allow}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	verdicts := func() string {
		var res []struct {
			From, To string
			Allowed  bool
		}
		if err := json.Unmarshal([]byte(lab("probe", "-n", "t", "-o", "json")), &res); err != nil {
			t.Fatal(err)
		}
		var v []string
		for _, r := range res {
			if r.To == "t/a1" && (r.From == "t/a2" || r.From == "t/a3") {
				v = append(v, fmt.Sprintf("%s:%v", r.From, r.Allowed))
			}
		}
		return strings.Join(v, " ")
	}
	if got := verdicts(); got != "t/a2:true t/a3:true" {
		t.Errorf("probe before the policy: %s", got)
	}
	t.Log(strings.TrimSpace(lab("apply", "-f", pol)))
	if got := verdicts(); got != "t/a2:true t/a3:false" {
		t.Errorf("probe once apply returned: %s, want a3 -> a1 denied", got)
	}
	t.Log(strings.TrimSpace(lab("delete", "-f", pol)))
	if got := verdicts(); got != "t/a2:true t/a3:true" {
		t.Errorf("probe once delete returned: %s", got)
	}
}

// tabbyLab runs `tabby-lab cluster <args>` on the cluster, as a user would.
func (c *Cluster) tabbyLab(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Bin, "tabby-lab"), append([]string{"cluster"}, args...)...)
	cmd.Env = append(cmd.Environ(), "TABBY_CLUSTER_STATE="+c.Dir, "TABBY_KUBE_BIN="+c.KubeBin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("tabby-lab cluster %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
