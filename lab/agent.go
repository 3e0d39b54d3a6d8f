package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd/bird"
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

// healthPort is calico-node's health endpoint inside a node's namespace
// (Calico's default: each node has its own loopback).
const healthPort = "9099"

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

// agentEnv is Calico's calico-node environment for node n: the variables a
// calico-node DaemonSet sets, plus where this lab keeps the node's files
// (Tabby's TABBY_BIRD_* and TABBY_FELIX_MTU_FILE: several nodes share one
// host's file system). With the Kubernetes datastore KUBECONFIG is the
// node's calico-kubeconfig, which reaches the API server through the lab's
// proxy (see nodeAPIAddr).
func (l *Lab) agentEnv(n *NodeState) []string {
	backend := l.State.Model.networkingBackend()
	clusterType := "k8s,bgp"
	if backend != "bird" {
		clusterType = "k8s"
	}
	env := []string{
		"NODENAME=" + n.Name,
		"CALICO_NETWORKING_BACKEND=" + backend,
		"CLUSTER_TYPE=" + clusterType,
		"IP=autodetect",
		"IP_AUTODETECTION_METHOD=interface=eth0",
		// The model's pools are created by up, before any agent.
		"NO_DEFAULT_POOLS=true",
		// The CNI plugin's kubeconfig is the lab's, not the host's.
		"CALICO_MANAGE_CNI=false",
		"FELIX_HEALTHENABLED=true",
		"FELIX_HEALTHHOST=127.0.0.1",
		"FELIX_HEALTHPORT=" + healthPort,
		"FELIX_PROMETHEUSMETRICSENABLED=false",
		"FELIX_LOGSEVERITYSCREEN=Info",
		"FELIX_ENDPOINTSTATUSPATHPREFIX=" + filepath.Join(n.Dir, "status"),
		"FELIX_IPV6SUPPORT=false",
		"CALICO_DISABLE_FILE_LOGGING=true",
		"CALICO_NODENAME_FILE=" + filepath.Join(n.Dir, "nodename"),
		// Tabby's (several nodes on one host): where BIRD's and felix's
		// files live.
		"TABBY_BIRD_CONFIG=" + filepath.Join(n.Dir, "bird.cfg"),
		"TABBY_BIRD_SOCKET=" + filepath.Join(n.Dir, "bird.ctl"),
		"TABBY_FELIX_MTU_FILE=" + filepath.Join(n.Dir, "mtu"),
	}
	if l.State.Datastore == DatastoreKubernetes {
		return append(env, "DATASTORE_TYPE=kubernetes", "KUBECONFIG="+nodeKubeconfig(n))
	}
	return append(env, l.datastoreEnv()...)
}

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
