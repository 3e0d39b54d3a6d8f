package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/lab/internal/harness"
)

// The node agent is the lab's one seam with what runs on a node.
//
// startAgent is the only place that knows how a node's agent is made: one
// calico-node process (node/cmd/calico-node) inside the node's network
// namespace, configured by Calico's environment (agentEnv), as the
// calico-node DaemonSet runs it on a host. calico-node initialises the
// datastore, registers the Node and its tunnel addresses, runs felix and
// (bird backend) confd in-process and supervises BIRD. agentReady is
// calico-node's own readiness probe (`calico-node -felix-ready
// -bird-ready`, as Calico's manifests) plus, with BGP, the full mesh
// Established (the lab wants every route before it probes).

// healthAddr is calico-node's health endpoint inside a node's namespace
// (Calico's default, localhost:9099: each node has its own loopback).
const healthAddr = "127.0.0.1:9099"

// networkingBackend is CALICO_NETWORKING_BACKEND for the model: vxlan when
// every pool encapsulates with VXLAN, else bird.
func (m *Model) networkingBackend() string {
	for _, p := range m.Pools {
		if p.Spec.VXLANMode == "" || p.Spec.VXLANMode == v3.VXLANModeNever {
			return "bird"
		}
	}
	return "vxlan"
}

// agentEnv is node n's calico-node environment: what Calico's calico.yaml
// (and Tabby's manifests/tabby.yaml) sets on the calico-node container,
// and nothing an operator would set through a FelixConfiguration (the
// environment outranks the datastore, so a pinned setting would make
// `calicoctl patch felixconfiguration` do nothing, silently). Beyond the
// manifest only what several nodes on one host need apart: where each
// node keeps its files (its nodename file, felix's endpoint status files,
// Tabby's TABBY_BIRD_* and TABBY_FELIX_MTU_FILE), autodetection on the
// node's eth0, and no default pool (up creates the model's pools). With
// the Kubernetes datastore KUBECONFIG is the node's calico-kubeconfig,
// which reaches the API server through the lab's proxy (see nodeAPIAddr).
func (l *Lab) agentEnv(n *NodeState) []string {
	backend := l.State.Model.networkingBackend()
	clusterType := "k8s,bgp"
	if backend != "bird" {
		clusterType = "k8s"
	}
	env := []string{
		// calico.yaml's.
		"NODENAME=" + n.Name,
		"CALICO_NETWORKING_BACKEND=" + backend,
		"CLUSTER_TYPE=" + clusterType,
		"IP=autodetect",
		"CALICO_DISABLE_FILE_LOGGING=true",
		"FELIX_DEFAULTENDPOINTTOHOSTACTION=ACCEPT",
		"FELIX_IPV6SUPPORT=false",
		"FELIX_HEALTHENABLED=true",
		// The lab's: several nodes on one host.
		"IP_AUTODETECTION_METHOD=interface=eth0",
		"NO_DEFAULT_POOLS=true",
		// The CNI plugin's kubeconfig is the lab's, not the host's.
		"CALICO_MANAGE_CNI=false",
		"FELIX_ENDPOINTSTATUSPATHPREFIX=" + filepath.Join(n.Dir, "status"),
		"CALICO_NODENAME_FILE=" + filepath.Join(n.Dir, "nodename"),
		"TABBY_BIRD_CONFIG=" + filepath.Join(n.Dir, "bird.cfg"),
		"TABBY_BIRD_SOCKET=" + birdSocket(n),
		"TABBY_FELIX_MTU_FILE=" + filepath.Join(n.Dir, "mtu"),
		// Each node's flow socket in its folder (FlowLogsLocalReporter).
		"TABBY_FELIX_FLOW_SOCKET_DIR=" + FlowSocketDir(n),
	}
	switch l.State.Dataplane {
	case DataplaneNftables:
		env = append(env, "FELIX_NFTABLESMODE=Enabled")
	case DataplaneIptables:
		env = append(env, "FELIX_NFTABLESMODE=Disabled")
	}
	env = append(env, l.goldmaneEnv()...)
	if l.State.Datastore == DatastoreKubernetes {
		return append(env, "DATASTORE_TYPE=kubernetes", "KUBECONFIG="+nodeKubeconfig(n))
	}
	return append(env, l.datastoreEnv()...)
}

// FlowSocketDir is the folder of node n's flow socket (felix serves it
// when FlowLogsLocalReporter is Enabled; `calicoctl flows --socket`).
func FlowSocketDir(n *NodeState) string { return filepath.Join(n.Dir, "flows") }

// startAgent starts node n's agent (see the comment above): the seam.
func (l *Lab) startAgent(_ context.Context, n *NodeState) error {
	_, err := l.spawn(agentLog(n), n.Netns, l.agentEnv(n), filepath.Join(l.Bin, "calico-node"))
	return err
}

// agentLog names node n's calico-node log (logs/calico-node-<node>.log).
func agentLog(n *NodeState) string { return "calico-node-" + n.Name }

func birdSocket(n *NodeState) string { return filepath.Join(n.Dir, "bird.ctl") }

// readyFlags are calico-node's readiness probe flags for the lab's backend
// (Calico's manifests: -bird-ready only with BIRD).
func (l *Lab) readyFlags() []string {
	if l.State.Model.networkingBackend() == "bird" {
		return []string{"-felix-ready", "-bird-ready"}
	}
	return []string{"-felix-ready"}
}

// agentProbe runs calico-node's readiness probe in node n's namespace as
// the kubelet would: "" when it exits 0, else its message.
func (l *Lab) agentProbe(ctx context.Context, n *NodeState) string {
	if n.VM != nil {
		return l.vmAgentProbe(*n)
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	argv := append([]string{"--net=" + netnsPath(n.Netns), "--", filepath.Join(l.Bin, "calico-node")}, l.readyFlags()...)
	cmd := exec.CommandContext(ctx, "nsenter", argv...)
	cmd.Env = append(os.Environ(), l.agentEnv(n)...)
	out, err := cmd.CombinedOutput()
	if err == nil {
		return ""
	}
	msg := strings.TrimSpace(string(out))
	var ee *exec.ExitError
	if !errors.As(err, &ee) || msg == "" {
		msg = strings.TrimSpace(msg + " " + err.Error())
	}
	return msg
}

// agentReady says why node n's agent is not ready yet ("" when it is):
// calico-node's readiness probe passes and, with BGP, a session
// Established to every other node (calico-node's rule asks that only in
// its first 30 s; the lab wants the full mesh's routes).
func (l *Lab) agentReady(ctx context.Context, n *NodeState) string {
	if n.VM != nil {
		return l.vmAgentProbe(*n) // calico-node's probe allows BGP its time
	}
	if why := l.agentProbe(ctx, n); why != "" {
		return why
	}
	if l.State.Model.networkingBackend() != "bird" {
		return ""
	}
	sessions, err := l.bgpSessions(ctx, n)
	if err != nil {
		return "BIRD: " + err.Error()
	}
	for _, o := range l.State.Nodes {
		if o.Name == n.Name {
			continue
		}
		if s, ok := sessions[peerAddr(o)]; !ok || !strings.HasPrefix(s, "Established") {
			return fmt.Sprintf("BGP session to %s (%s): %q", o.Name, peerAddr(o), s)
		}
	}
	return ""
}

func peerAddr(n NodeState) string { a, _, _ := strings.Cut(n.Addr, "/"); return a }

// bgpSessions maps each BGP peer address of node n to its session state
// (BIRD's protocol info, "Established" when up).
func (l *Lab) bgpSessions(ctx context.Context, n *NodeState) (map[string]string, error) {
	if n.VM != nil {
		return l.vmBGPSessions(*n)
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := bird.Exec{Socket: birdSocket(n)}.Command(ctx, "show", "protocols")
	if err != nil {
		return nil, fmt.Errorf("birdc show protocols: %w", err)
	}
	// Calico names mesh peers Mesh_<a>_<b>_<c>_<d>.
	res := map[string]string{}
	for name, p := range bird.ParseProtocols(string(out)) {
		addr, ok := strings.CutPrefix(name, "Mesh_")
		if !ok {
			continue
		}
		res[strings.ReplaceAll(addr, "_", ".")] = p.Info
	}
	return res, nil
}

// agentPids are the running calico-node processes of node n: the lab's
// (by its marker), started as n's agent (NODENAME), calico-node itself
// (not BIRD, which inherits its environment, nor a probe run).
func (l *Lab) agentPids(n *NodeState) []int {
	var out []int
	for _, pid := range markedProcesses(l.State.Prefix) {
		dir := filepath.Join("/proc", strconv.Itoa(pid))
		env, _ := os.ReadFile(filepath.Join(dir, "environ"))
		cmdline, _ := os.ReadFile(filepath.Join(dir, "cmdline"))
		argv := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(argv) == 1 && filepath.Base(argv[0]) == "calico-node" &&
			bytes.Contains(append([]byte{0}, env...), []byte("\x00NODENAME="+n.Name+"\x00")) && harness.Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// agentState says whether node n's calico-node runs: "" when it does,
// else what is wrong (gone, with the end of its log; or paused).
func (l *Lab) agentState(n *NodeState) string {
	pids := l.agentPids(n)
	if len(pids) == 0 {
		return fmt.Sprintf("not running (exited: %s; tabby-lab restart %s)", lastLine(l.logTail(agentLog(n))), n.Name)
	}
	for _, pid := range pids {
		if processState(pid) == 'T' {
			return fmt.Sprintf("paused (process %d stopped: kill -CONT %d)", pid, pid)
		}
	}
	return ""
}

// lastLine is the last non-empty line of s ("no log" when none).
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if last := strings.TrimSpace(lines[len(lines)-1]); last != "" {
		return "last log line: " + last
	}
	return "no log"
}

// processState is the state letter of a process (R, S, T, Z...; 0 when
// it is gone).
func processState(pid int) byte {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2]
	}
	return 0
}

// Restart stops the calico-node of each of nodes if it still runs
// (SIGTERM, as the kubelet stops a container, then SIGKILL after a grace
// period; BIRD goes with it) and starts it again with the same
// environment, then waits until they are all ready (as up does; with BGP
// a node is ready once its sessions to every other node are up, so nodes
// that went down together are restarted together), naming why not after
// timeout.
func (l *Lab) Restart(ctx context.Context, nodes []string, timeout time.Duration) error {
	var restart []*NodeState
	for _, name := range nodes {
		i := slices.IndexFunc(l.State.Nodes, func(n NodeState) bool { return n.Name == name })
		if i < 0 {
			return fmt.Errorf("no node %q in the lab (see tabby-lab status)", name)
		}
		restart = append(restart, &l.State.Nodes[i])
	}
	for _, n := range restart {
		pids := l.agentPids(n)
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGCONT) // a paused one cannot stop
		}
		if err := harness.KillAll(pids, 5*time.Second); err != nil {
			return err
		}
		if err := l.startAgent(ctx, n); err != nil {
			return err
		}
		l.step("calico-node of %s started again", n.Name)
	}
	return l.waitAgentsReady(ctx, restart, timeout)
}
