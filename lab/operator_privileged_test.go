//go:build privileged

package lab

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/lab/internal/harness"
)

// operatorModel is the default model plus pods that serve other ports
// than the e2e model's: a DNS server (53 on UDP and TCP) and a database
// (5432 on TCP), in namespace svc.
func operatorModel(t *testing.T) *Model {
	m := DefaultModel()
	m.Namespaces = append(m.Namespaces, Namespace{Name: "svc", Labels: map[string]string{"ns": "svc"}})
	m.Pods = append(m.Pods,
		Pod{Namespace: "svc", Name: "dns", Labels: map[string]string{"app": "dns"}, Ports: []Port{{Port: 53, Protocol: "UDP"}, {Port: 53, Protocol: "TCP"}}},
		Pod{Namespace: "svc", Name: "db", Labels: map[string]string{"app": "db"}, Ports: []Port{{Port: 5432, Protocol: "TCP"}}})
	if err := m.Complete(); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestPrivilegedLabOperator: what a Calico operator does with the lab,
// on one lab (etcd): pods serving their own ports come up and are probed
// on exactly those; `calicoctl node status` from `tabby-lab env`; apply
// waits on felix's report for a service-account policy, a HostEndpoint
// policy and a policy selecting by a label set live with calicoctl label
// (each table as expected on the first probe after apply returns); a
// paused agent and a killed one are named (by apply and by status);
// restart brings a killed agent back; a FelixConfiguration patch takes
// effect (the agent's environment pins nothing an operator sets there).
func TestPrivilegedLabOperator(t *testing.T) {
	l, _ := upLab(t, operatorModel(t), DatastoreEtcd)
	t.Run("per-pod-ports", func(t *testing.T) { perPodPorts(t, l) })
	t.Run("calicoctl-node-status", func(t *testing.T) { nodeStatusFromEnv(t, l) })
	t.Run("service-account-policy", func(t *testing.T) { serviceAccountPolicy(t, l) })
	t.Run("hostendpoint-policy", func(t *testing.T) { hostEndpointPolicy(t, l) })
	t.Run("label-changed-live", func(t *testing.T) { labelChangedLive(t, l) })
	t.Run("paused-agent", func(t *testing.T) { pausedAgent(t, l) })
	t.Run("killed-agent-restart", func(t *testing.T) { killedAgentRestart(t, l) })
	t.Run("felixconfiguration-patch", func(t *testing.T) { felixConfigurationPatch(t, l) })
	downAndCheck(t, l)
}

// perPodPorts: every pod is probed on exactly the ports it serves, and
// all are allowed.
func perPodPorts(t *testing.T, l *Lab) {
	probeUntil(t, l, allAllowed, 30*time.Second)
	res := probeExactly(t, l, allAllowed)
	checkProbedPorts(t, l, res)
	// To each pod from each of the 10 others: the 9 e2e pods on 4 ports,
	// the DNS pod on 2, the database on 1.
	if want := 9*10*4 + 10*2 + 10*1; len(res) != want {
		t.Errorf("%d probes, want %d", len(res), want)
	}
}

// checkProbedPorts checks that each pod was probed from every other pod
// on exactly the ports it serves.
func checkProbedPorts(t *testing.T, l *Lab, res []ProbeResult) {
	t.Helper()
	got := map[string][]string{}
	for _, r := range res {
		got[r.To] = append(got[r.To], r.From+" "+r.Port)
	}
	for _, to := range l.State.Pods {
		var want []string
		for _, from := range l.State.Pods {
			for _, pt := range to.Ports {
				if from.Key() != to.Key() {
					want = append(want, from.Key()+" "+pt.String())
				}
			}
		}
		slices.Sort(want)
		slices.Sort(got[to.Key()])
		if !slices.Equal(got[to.Key()], want) {
			t.Errorf("pod %s (serving %v) probed as %v, want %v", to.Key(), to.Ports, got[to.Key()], want)
		}
	}
}

// nodeStatusFromEnv: after `eval "$(tabby-lab env)"`, calicoctl node
// status shows node0's BGP sessions, every one Established.
func nodeStatusFromEnv(t *testing.T, l *Lab) {
	script := fmt.Sprintf(`eval "$(%s --state %s env)" && calicoctl node status`, filepath.Join(l.Bin, "tabby-lab"), l.Dir)
	out, err := exec.Command("bash", "-c", script).CombinedOutput()
	if err != nil {
		t.Fatalf("calicoctl node status: %v\n%s", err, out)
	}
	if n := strings.Count(string(out), "Established"); n != len(l.State.Nodes)-1 {
		t.Errorf("calicoctl node status shows %d Established sessions, want %d:\n%s", n, len(l.State.Nodes)-1, out)
	}
	for _, o := range l.State.Nodes[1:] {
		if !strings.Contains(string(out), peerAddr(o)) {
			t.Errorf("calicoctl node status does not show %s's address %s:\n%s", o.Name, peerAddr(o), out)
		}
	}
}

// serviceAccountPolicy: a policy selecting by service account (the
// model knows nothing of them) is waited for and enforced.
func serviceAccountPolicy(t *testing.T, l *Lab) {
	pol := []byte(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: sa-from-y, namespace: x}
spec:
  serviceAccountSelector: projectcalico.org/name == 'default'
  types: [Ingress]
  ingress:
  - action: Allow
    source: {namespaceSelector: ns == 'y'}
`)
	applyAndWait(t, l, pol, false)
	probeExactly(t, l, sampleVerdict)
	// `tabby-lab report` shows it on each x pod of the node, programmed.
	for _, n := range l.State.Nodes {
		var rep daemon.Report
		if err := json.Unmarshal(labCLI(t, l, "report", n.Name), &rep); err != nil {
			t.Fatal(err)
		}
		var onX, programmed int
		for _, ep := range rep.Endpoints {
			for _, c := range endpointPolicyChains(ep, PolicyRef{Kind: v3.KindNetworkPolicy, Namespace: "x", Name: "sa-from-y"}) {
				onX++
				if c.Programmed && len(c.RuleHashes) > 0 {
					programmed++
				}
			}
		}
		want := 0
		for _, p := range l.State.Pods {
			if p.Namespace == "x" && p.Node == n.Name {
				want += 3 // the policy's chain and the endpoint's two
			}
		}
		if onX != want || programmed != want {
			t.Errorf("%s's report: %d chains of sa-from-y and its endpoints (%d programmed), want %d", n.Name, onX, programmed, want)
		}
	}
	applyAndWait(t, l, pol, true)
	probeExactly(t, l, allAllowed)
}

// labCLI runs the lab's tabby-lab on this lab and returns its output.
func labCLI(t *testing.T, l *Lab, args ...string) []byte {
	t.Helper()
	out, err := exec.Command(filepath.Join(l.Bin, "tabby-lab"), append([]string{"--state", l.Dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("tabby-lab %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// hostEndpointPolicy: node1's eth0 as a HostEndpoint with an
// applyOnForward policy denying UDP 81 forwarded in through it: pods on
// node1 are then unreachable on UDP 81 from other nodes' pods, and
// reachable from node1's own.
func hostEndpointPolicy(t *testing.T, l *Lab) {
	n1 := l.State.Nodes[1]
	docs := []byte(fmt.Sprintf(`apiVersion: projectcalico.org/v3
kind: HostEndpoint
metadata: {name: node1-eth0, labels: {role: lab-node}}
spec: {node: %s, interfaceName: eth0, expectedIPs: [%s]}
---
apiVersion: projectcalico.org/v3
kind: GlobalNetworkPolicy
metadata: {name: hep-deny-udp81-forwarded}
spec:
  selector: role == 'lab-node'
  applyOnForward: true
  types: [Ingress, Egress]
  ingress:
  - {action: Deny, protocol: UDP, destination: {ports: [81]}}
  - {action: Allow}
  egress:
  - {action: Allow}
`, n1.Name, peerAddr(n1)))
	applyAndWait(t, l, docs, false)
	node := map[string]string{}
	for _, p := range l.State.Pods {
		node[p.Key()] = p.Node
	}
	probeExactly(t, l, func(r ProbeResult) bool {
		return !(node[r.To] == n1.Name && node[r.From] != n1.Name && r.Port == "udp/81")
	})
	applyAndWait(t, l, docs, true)
	probeExactly(t, l, allAllowed)
}

// labelChangedLive: y/b labelled role=db with calicoctl (the model does
// not know); a policy denying ingress to role == 'db' then applies to it.
func labelChangedLive(t *testing.T, l *Lab) {
	wep := endpointName(t, l, "y", "b")
	calicoctlRun(t, l, "label", "workloadendpoints", wep, "-n", "y", "role=db")
	pol := []byte(`apiVersion: projectcalico.org/v3
kind: NetworkPolicy
metadata: {name: deny-to-db, namespace: "y"}
spec: {selector: role == 'db', types: [Ingress]}
`)
	applyAndWait(t, l, pol, false)
	probeExactly(t, l, func(r ProbeResult) bool { return r.To != "y/b" })
	applyAndWait(t, l, pol, true)
	calicoctlRun(t, l, "label", "workloadendpoints", wep, "-n", "y", "role", "--remove")
	probeUntil(t, l, allAllowed, 10*time.Second)
}

// pausedAgent: with node1's calico-node paused (SIGSTOP), the wait for
// an edit fails after its bound naming node1 (its felix does not answer)
// and only node1, status says paused, and the wait passes once it runs
// again, the first probe showing the edited table.
func pausedAgent(t *testing.T, l *Lab) {
	n1 := &l.State.Nodes[1]
	pids := l.agentPids(n1)
	if len(pids) != 1 {
		t.Fatalf("calico-node processes of node1: %v", pids)
	}
	applyAndWait(t, l, allowFromYOn(80, "labels: {v: \"1\"}"), false)
	if err := syscall.Kill(pids[0], syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	edit, err := l.Apply(context.Background(), allowFromYOn(81, "labels: {v: \"1\"}"), false)
	if err != nil {
		_ = syscall.Kill(pids[0], syscall.SIGCONT)
		t.Fatal(err)
	}
	err = l.WaitProgrammed(context.Background(), edit, 3*time.Second)
	state := l.agentState(n1)
	_ = syscall.Kill(pids[0], syscall.SIGCONT)
	if err == nil || !strings.Contains(err.Error(), "node1 (felix's endpoint report: no answer") ||
		strings.Contains(err.Error(), "node0") || strings.Contains(err.Error(), "node2") {
		t.Fatalf("wait for an edit with node1's calico-node paused: %v; want node1 named (no answer), and only node1", err)
	}
	t.Log(err)
	if !strings.HasPrefix(state, "paused") {
		t.Errorf("status of a paused agent: %q", state)
	}
	if err := l.WaitProgrammed(context.Background(), edit, 30*time.Second); err != nil {
		t.Fatalf("node1's calico-node running again: %v", err)
	}
	probeExactly(t, l, allowFromYOnVerdict(81))
	applyAndWait(t, l, allowFromYOn(81, "labels: {v: \"1\"}"), true)
}

// killedAgentRestart: node1's calico-node killed (-9): status says it is
// not running, the wait for a new policy fails naming node1 and only
// node1; restart brings it back, the wait passes and the first probe
// shows the policy.
func killedAgentRestart(t *testing.T, l *Lab) {
	n1 := &l.State.Nodes[1]
	if err := harness.KillAll(l.agentPids(n1), 0); err != nil {
		t.Fatal(err)
	}
	if status := string(labCLI(t, l, "status")); !strings.Contains(status, "not running (exited") {
		t.Errorf("tabby-lab status with node1's calico-node killed:\n%s", status)
	}
	sample := readExample(t, "deny-x-allow-from-y.yaml")
	refs, err := l.Apply(context.Background(), sample, false)
	if err != nil {
		t.Fatal(err)
	}
	err = l.WaitProgrammed(context.Background(), refs, 3*time.Second)
	if err == nil || !strings.Contains(err.Error(), "node1 (felix's endpoint report:") || strings.Contains(err.Error(), "node0") || strings.Contains(err.Error(), "node2") {
		t.Fatalf("wait with node1's calico-node killed: %v; want node1 named, and only node1", err)
	}
	t.Log(err)
	start := time.Now()
	t.Logf("%s", labCLI(t, l, "restart", n1.Name))
	t.Logf("restart of node1's calico-node to ready: %s", time.Since(start).Round(10*time.Millisecond))
	if state := l.agentState(n1); state != "" {
		t.Errorf("status after restart: %q", state)
	}
	if err := l.WaitProgrammed(context.Background(), refs, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	probeExactly(t, l, sampleVerdict)
	applyAndWait(t, l, sample, true)
	probeExactly(t, l, allAllowed)
}

// felixConfigurationPatch: prometheusMetricsEnabled patched into the
// default FelixConfiguration takes effect on every node (felix's metrics
// port answers): nothing in the agents' environment overrides it. felix
// applies this setting at start, so it restarts inside calico-node (as
// Calico's runit restarts felix alone): calico-node keeps running.
func felixConfigurationPatch(t *testing.T, l *Lab) {
	for _, n := range l.State.Nodes {
		if metricsServed(n) {
			t.Fatalf("%s serves felix's metrics before the patch: the test would prove nothing", n.Name)
		}
	}
	calicoctlRun(t, l, "patch", "felixconfiguration", "default", "-p", `{"spec":{"prometheusMetricsEnabled":true}}`)
	waitNodes(t, l, "felix's metrics", metricsServed)
	probeUntil(t, l, allAllowed, 30*time.Second)
}

// waitNodes waits up to 30 s until ready holds on every node, failing if
// a node's calico-node exits meanwhile (felix restarts inside it).
func waitNodes(t *testing.T, l *Lab, what string, ready func(NodeState) bool) {
	t.Helper()
	for i := range l.State.Nodes {
		n := &l.State.Nodes[i]
		deadline := time.Now().Add(30 * time.Second)
		for !ready(*n) {
			if state := l.agentState(n); strings.HasPrefix(state, "not running") {
				t.Fatalf("%s: calico-node exited after the patch (felix restarts inside it): %s", n.Name, state)
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %s not there 30s after the patch (agent: %q)", n.Name, what, l.agentState(n))
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
}

// metricsServed says whether felix's metrics port (Calico's default
// 9091) answers /metrics with felix's metrics inside node n's namespace.
func metricsServed(n NodeState) bool {
	c, netns, err := nodeHTTPClient(n, time.Second)
	if err != nil {
		return false
	}
	defer netns.Close()
	resp, err := c.Get("http://127.0.0.1:9091/metrics")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return strings.Contains(string(body), "felix_")
}

// endpointName is the name of pod ns/pod's WorkloadEndpoint.
func endpointName(t *testing.T, l *Lab, namespace, pod string) string {
	t.Helper()
	c, err := l.client()
	if err != nil {
		t.Fatal(err)
	}
	weps, err := c.List(context.Background(), v3.KindWorkloadEndpoint, datastore.ListOptions{Namespace: namespace})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range weps.Items {
		if w := o.(*v3.WorkloadEndpoint); w.Spec.Pod == pod {
			return w.Name
		}
	}
	t.Fatalf("no WorkloadEndpoint for pod %s/%s", namespace, pod)
	return ""
}

// calicoctlRun runs the lab's calicoctl against its datastore.
func calicoctlRun(t *testing.T, l *Lab, args ...string) {
	t.Helper()
	cmd := exec.Command(filepath.Join(l.Bin, "calicoctl"), args...)
	cmd.Env = append(os.Environ(), l.datastoreEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("calicoctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}
