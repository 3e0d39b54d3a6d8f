package cluster

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/cni-plugin/wiring"
)

// The chaos run's faults and how long each takes to be ready again.

// readyTimeout bounds every wait for readiness after a fault.
const readyTimeout = 5 * time.Minute

// inject applies one fault and waits until the cluster is ready again:
// the time from the fault's end (the restart) to ready, the fault's own
// figures, and an error when it did not come back.
func (r *chaosRun) inject(ctx context.Context, fault string) (time.Duration, string, error) {
	n := r.c.State.Nodes[r.victim]
	switch fault {
	case FaultAgentKill:
		p, err := r.agentPod(ctx, n.Name)
		if err != nil {
			return 0, "", err
		}
		t := time.Now()
		if err := r.c.KillContainer(n, agentContainerID(p)); err != nil {
			return 0, "", err
		}
		return r.waitNodeBack(ctx, n, t, false, "")
	case FaultAgentDelete:
		p, err := r.agentPod(ctx, n.Name)
		if err != nil {
			return 0, "", err
		}
		t := time.Now()
		if _, err := r.c.Kubectl(ctx, "-n", "kube-system", "delete", "pod", p.Name, "--wait=false"); err != nil {
			return 0, "", err
		}
		return r.waitNodeBack(ctx, n, t, false, "")
	case FaultPowerLoss:
		if err := r.c.PowerOff(n); err != nil {
			return 0, "", err
		}
		time.Sleep(r.o.PowerOff)
		t := time.Now()
		if err := r.c.PowerOn(r.victim); err != nil {
			return 0, "", err
		}
		return r.waitNodeBack(ctx, r.c.State.Nodes[r.victim], t, true, fmt.Sprintf("off %s", r.o.PowerOff))
	case FaultDatastore:
		restart, err := r.c.StopDatastore()
		if err != nil {
			return 0, "", err
		}
		time.Sleep(r.o.Outage)
		t := time.Now()
		if err := restart(); err != nil {
			return 0, "", err
		}
		if err := r.c.waitAPI(ctx, time.Minute); err != nil {
			return time.Since(t), "", err
		}
		api := time.Since(t)
		prog, addr, perr := r.newPodProgrammed(ctx, n, "after-outage")
		d, _, err := r.waitClusterReady(ctx, t)
		if err == nil {
			err = perr
		}
		return max(d, prog), fmt.Sprintf("down %s; API back in %.1f s; a pod created then: address (kubelet, CNI ADD) in %.1f s, policy programmed (felix) in %.1f s",
			r.o.Outage, api.Seconds(), addr.Seconds(), prog.Seconds()), err
	case FaultRoll:
		return r.roll(ctx)
	case FaultNodeReplace:
		return r.replaceNode(ctx, n)
	}
	return 0, "", fmt.Errorf("unknown fault %q (have %s)", fault, strings.Join(AllFaults(), ", "))
}

// newPodProgrammed creates pod name on node n at once and returns how
// long until felix there programmed its endpoint (its cali-tw chain:
// felix follows the datastore again) and until the CNI plugin gave it an
// address (kubelet follows the API again and ran its sandbox). The pod
// is deleted after.
func (r *chaosRun) newPodProgrammed(ctx context.Context, n NodeState, name string) (programmed, addressed time.Duration, _ error) {
	t := time.Now()
	for {
		_, err := r.kc.CoreV1().Pods(chaosOpen).Create(ctx, agnPod(chaosOpen, name, n.Name, nil), metav1.CreateOptions{})
		if err == nil {
			break
		}
		if time.Since(t) > time.Minute {
			return time.Since(t), 0, err
		}
		time.Sleep(250 * time.Millisecond) // the API server may still be loading
	}
	defer func() {
		zero := int64(0)
		_ = r.kc.CoreV1().Pods(chaosOpen).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &zero})
	}()
	chain := "cali-tw-" + wiring.HostVethName(chaosOpen, name)
	for deadline := time.Now().Add(readyTimeout); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(100 * time.Millisecond) {
		if addressed == 0 {
			// The CNI plugin's annotation: its ADD gave the pod an address.
			if p, err := r.kc.CoreV1().Pods(chaosOpen).Get(ctx, name, metav1.GetOptions{}); err == nil && p.Annotations["cni.projectcalico.org/podIP"] != "" {
				addressed = time.Since(t)
			}
		}
		if out, err := run("nsenter", "--net="+netnsPath(n.Netns), "--", "nft", "list", "chains"); err == nil && strings.Contains(out, chain) {
			return time.Since(t), addressed, nil
		}
	}
	return time.Since(t), addressed, fmt.Errorf("%s on %s: no policy programmed after %s", name, n.Name, readyTimeout)
}

// agentPod is the calico-node pod on node.
func (r *chaosRun) agentPod(ctx context.Context, node string) (*corev1.Pod, error) {
	l, err := r.kc.CoreV1().Pods("kube-system").List(ctx, metav1.ListOptions{LabelSelector: "k8s-app=calico-node", FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return nil, err
	}
	for i := range l.Items {
		if l.Items[i].DeletionTimestamp == nil {
			return &l.Items[i], nil
		}
	}
	return nil, fmt.Errorf("no calico-node pod on %s", node)
}

func agentContainerID(p *corev1.Pod) string {
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == "calico-node" {
			return s.ContainerID
		}
	}
	return ""
}

// waitNodeBack waits until node n is back after a fault that ended at
// t: its Node reported Ready since, its calico-node container started
// since and ready (and its felix answers /readiness), the guard runs,
// and the whole cluster is ready.
func (r *chaosRun) waitNodeBack(ctx context.Context, n NodeState, t time.Time, podsToo bool, detail string) (time.Duration, string, error) {
	since := t.Truncate(time.Second)
	first := map[string]time.Duration{}
	var order []string
	last := ""
	for deadline := time.Now().Add(readyTimeout); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(250 * time.Millisecond) {
		last = ""
		for _, m := range r.nodeBack(ctx, n, since, podsToo) {
			if _, seen := first[m.name]; m.ok && !seen {
				first[m.name] = time.Since(t)
				order = append(order, m.name)
			}
			if !m.ok && last == "" {
				last = m.name
			}
		}
		if last != "" {
			continue
		}
		var parts []string
		for _, name := range order {
			parts = append(parts, fmt.Sprintf("%s +%.1f s", name, first[name].Seconds()))
		}
		d, _, err := r.waitClusterReady(ctx, t)
		return d, strings.TrimPrefix(detail+"; "+strings.Join(parts, ", "), "; "), err
	}
	if ctx.Err() != nil {
		return time.Since(t), detail, fmt.Errorf("%s: stopped after %s waiting for %s: %w", n.Name, time.Since(t).Round(time.Second), last, ctx.Err())
	}
	for _, l := range []string{"kubelet-" + n.Name, "containerd-" + n.Name} {
		tail := r.c.logTail(l)
		r.logf("%s not back: the end of %s's log:\n%s", n.Name, l, tail[max(0, len(tail)-1500):])
	}
	return time.Since(t), detail, fmt.Errorf("%s not back after %s: waiting for %s", n.Name, readyTimeout, last)
}

// milestone is one condition of a node's return.
type milestone struct {
	name string
	ok   bool
}

// nodeBack is where node n stands since since: its Node reported Ready,
// its calico-node container started and ready, felix's /readiness, the
// and, when the node's pods were restarted too (podsToo), the guard
// running in a container started since.
func (r *chaosRun) nodeBack(ctx context.Context, n NodeState, since time.Time, podsToo bool) []milestone {
	nodeReady, started, ready := false, false, false
	if node, err := r.kc.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
		for _, c := range node.Status.Conditions {
			nodeReady = nodeReady || (c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue && !c.LastHeartbeatTime.Time.Before(since))
		}
	}
	if p, err := r.agentPod(ctx, n.Name); err == nil {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == "calico-node" && s.State.Running != nil && !s.State.Running.StartedAt.Time.Before(since) {
				started, ready = true, s.Ready
			}
		}
	}
	ms := []milestone{{"Node Ready", nodeReady}, {"calico-node started", started}, {"felix ready", agentReady(ctx, n)}, {"calico-node Ready", ready}}
	if podsToo {
		g := r.obs.guard()
		ms = append(ms, milestone{"guard restarted", g != nil && startedSince(g, since)})
	}
	return ms
}

// waitClusterReady waits until every node, calico-node and
// kube-controllers is ready, every felix answers /readiness and the
// guard runs; the time is counted from t.
func (r *chaosRun) waitClusterReady(ctx context.Context, t time.Time) (time.Duration, string, error) {
	last := ""
	for deadline := time.Now().Add(readyTimeout); time.Now().Before(deadline) && ctx.Err() == nil; time.Sleep(250 * time.Millisecond) {
		if last = r.c.readiness(ctx, r.kc); last != "" {
			continue
		}
		last = ""
		for _, n := range r.c.State.Nodes {
			if !agentReady(ctx, n) {
				last = n.Name + ": felix /readiness not OK"
			}
		}
		if last == "" && r.obs.guard() == nil {
			last = "guard not running"
		}
		if last == "" {
			return time.Since(t), "", nil
		}
	}
	return time.Since(t), "", fmt.Errorf("cluster not ready after %s: %s", readyTimeout, last)
}

// startedSince: every container of p runs, started at since or later.
func startedSince(p *corev1.Pod, since time.Time) bool {
	for _, s := range p.Status.ContainerStatuses {
		if s.State.Running == nil || s.State.Running.StartedAt.Time.Before(since) {
			return false
		}
	}
	return len(p.Status.ContainerStatuses) > 0
}

// agentReady: felix's health endpoint on node n (calico-node runs in
// the node's network namespace) answers /readiness with 200.
func agentReady(ctx context.Context, n NodeState) bool {
	netns, err := ns.GetNS(netnsPath(n.Netns))
	if err != nil {
		return false
	}
	defer netns.Close()
	conn, err := Dial(ctx, netns, net.JoinHostPort("127.0.0.1", "9099"), time.Second)
	if err != nil {
		return false
	}
	defer conn.Close()
	code, _, err := httpDo(conn, "/readiness", 2*time.Second)
	return err == nil && code == 200
}

// roll rolls the calico-node DaemonSet to a new tag of the same image
// and back, each waited for with kubectl rollout status.
func (r *chaosRun) roll(ctx context.Context) (time.Duration, string, error) {
	next, err := r.c.TagImage("chaos-roll")
	if err != nil {
		return 0, "", err
	}
	t := time.Now()
	there, err := r.c.RollAgents(ctx, next)
	if err != nil {
		return time.Since(t), "", err
	}
	back, err := r.c.RollAgents(ctx, r.c.State.Image)
	if err != nil {
		return time.Since(t), "", err
	}
	d, _, err := r.waitClusterReady(ctx, t)
	return d, fmt.Sprintf("to %s in %.1f s, back in %.1f s", next, there.Seconds(), back.Seconds()), err
}

// TagImage tags the cluster's Tabby image anew as tag in every node's
// containerd (as an upgrade's pull would bring it) and returns the new
// reference.
func (c *Cluster) TagImage(tag string) (string, error) {
	base, _, _ := strings.Cut(c.State.Image, "@")
	if i := strings.LastIndex(base, ":"); i > strings.LastIndex(base, "/") {
		base = base[:i]
	}
	next := base + ":" + tag
	for _, n := range c.State.Nodes {
		if _, err := run(inNode(n, "ctr", "-n", "k8s.io", "images", "tag", "--force", c.State.Image, next)...); err != nil {
			return "", err
		}
	}
	return next, nil
}

// RollAgents sets every container of the calico-node DaemonSet to image
// and waits for the rollout: its duration.
func (c *Cluster) RollAgents(ctx context.Context, image string) (time.Duration, error) {
	t := time.Now()
	if _, err := c.Kubectl(ctx, "-n", "kube-system", "set", "image", "daemonset/calico-node", "*="+image); err != nil {
		return 0, err
	}
	_, err := c.Kubectl(ctx, "-n", "kube-system", "rollout", "status", "daemonset/calico-node", "--timeout=5m")
	return time.Since(t), err
}

// replaceNode drains node n, deletes its Node, waits for the pod
// garbage collector to remove the pods still bound to it (its
// calico-node), then re-adds it (its kubelet restarted registers it).
func (r *chaosRun) replaceNode(ctx context.Context, n NodeState) (time.Duration, string, error) {
	t0 := time.Now()
	if _, err := r.c.Kubectl(ctx, "drain", n.Name, "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--grace-period=0", "--timeout=3m"); err != nil {
		return 0, "", err
	}
	drained := time.Since(t0)
	if _, err := r.c.Kubectl(ctx, "delete", "node", n.Name); err != nil {
		return 0, "", err
	}
	t1 := time.Now()
	gone := "pods bound to it removed"
	for {
		l, err := r.kc.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + n.Name})
		if err == nil && len(l.Items) == 0 {
			break
		}
		if time.Since(t1) > 2*time.Minute {
			gone = "pods bound to it NOT removed after 2 m"
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	gc := time.Since(t1)
	t := time.Now()
	if err := r.c.RestartKubelet(n); err != nil {
		return 0, "", err
	}
	return r.waitNodeBack(ctx, n, t, true, fmt.Sprintf("drained in %.1f s; Node deleted, %s in %.1f s", drained.Seconds(), gone, gc.Seconds()))
}
