package lab

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/confd"
	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/confd/render"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/node/registration"
)

// The node agent is the lab's one seam with what runs on a node.
//
// startAgent is the only place that knows how a node's agent is made. Today
// it does what calico-node will do, with the pieces that exist: it
// registers the Node (node/registration, IP autodetected on eth0 as
// IP_AUTODETECTION_METHOD=interface=eth0) with its tunnel addresses, then
// starts BIRD inside the node's namespace, confd and felix (each its own
// process, configured by Calico's environment variables). When the
// calico-node binary lands, this function becomes one spawn of it with
// agentEnv, and agentReady asks its /readiness instead.

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
// (the names calico-node reads; felix and confd ignore the ones they do
// not). calico-node will run inside the node's namespace: with the
// Kubernetes datastore its KUBECONFIG is then <node dir>/calico-kubeconfig
// (the API through the lab's proxy, see nodeAPIAddr), not the admin one the
// agents beside the namespace use today.
func (l *Lab) agentEnv(n *NodeState) []string {
	env := []string{
		"NODENAME=" + n.Name,
		"CALICO_NETWORKING_BACKEND=" + l.State.Model.networkingBackend(),
		"IP=autodetect",
		"IP_AUTODETECTION_METHOD=interface=eth0",
		"FELIX_FELIXHOSTNAME=" + n.Name,
		"FELIX_HEALTHENABLED=true",
		"FELIX_HEALTHHOST=127.0.0.1",
		"FELIX_HEALTHPORT=" + strconv.Itoa(n.HealthPort),
		"FELIX_PROMETHEUSMETRICSENABLED=false",
		"FELIX_LOGSEVERITYSCREEN=Info",
		"FELIX_ENDPOINTSTATUSPATHPREFIX=" + filepath.Join(n.Dir, "status"),
		"CALICO_DISABLE_FILE_LOGGING=true",
		"CALICO_NODENAME_FILE=" + filepath.Join(n.Dir, "nodename"),
		"FELIX_IPV6SUPPORT=false",
		// Tabby's (several nodes on one host): where BIRD's files live.
		"TABBY_BIRD_CONFIG=" + filepath.Join(n.Dir, "bird.cfg"),
		"TABBY_BIRD_SOCKET=" + filepath.Join(n.Dir, "bird.ctl"),
		// Tabby's: the agent runs beside the node's namespace and programs it.
		"TABBY_FELIX_NETNS=" + netnsPath(n.Netns),
		"TABBY_FELIX_MTU_FILE=" + filepath.Join(n.Dir, "mtu"),
	}
	return append(env, l.datastoreEnv()...)
}

// startAgent starts node n's agent (see the comment above): the seam.
func (l *Lab) startAgent(ctx context.Context, n *NodeState) error {
	if err := l.registerNode(ctx, n); err != nil {
		return err
	}
	env := l.agentEnv(n)
	if l.State.Model.networkingBackend() == "bird" {
		if err := l.startBIRD(ctx, n, env); err != nil {
			return err
		}
	}
	if _, err := l.spawn("felix-"+n.Name, "", env, filepath.Join(l.Bin, "felix")); err != nil {
		return err
	}
	return nil
}

// registerNode is calico-node's start-up registration: the Node with its
// autodetected address, and its tunnel addresses.
func (l *Lab) registerNode(ctx context.Context, n *NodeState) error {
	h, err := openNetns(n.Netns)
	if err != nil {
		return err
	}
	defer h.Close()
	env, err := registration.NetlinkEnv(h.NL)
	if err != nil {
		return err
	}
	c, err := l.client()
	if err != nil {
		return err
	}
	if _, err := registration.Register(ctx, c, registration.Config{NodeName: n.Name, IPv4: "autodetect", IPv4Method: "interface=eth0"}, env); err != nil {
		return fmt.Errorf("registering node %s: %w", n.Name, err)
	}
	if err := registration.EnsureTunnelAddrs(ctx, c, ipam.New(c, ipam.Config{}), n.Name); err != nil {
		return fmt.Errorf("tunnel addresses of node %s: %w", n.Name, err)
	}
	return nil
}

func birdFiles(n *NodeState) (cfg, ctl, log string) {
	return filepath.Join(n.Dir, "bird.cfg"), filepath.Join(n.Dir, "bird.ctl"), filepath.Join(n.Dir, "bird.log")
}

// startBIRD renders the node's first BIRD configuration, runs BIRD in the
// node's namespace and confd beside it (which keeps the configuration in
// step from then on).
func (l *Lab) startBIRD(ctx context.Context, n *NodeState, env []string) error {
	c, err := l.client()
	if err != nil {
		return err
	}
	var rs []v3.Resource
	for _, k := range confd.Kinds {
		list, err := c.List(ctx, k, datastore.ListOptions{})
		if err != nil {
			return fmt.Errorf("reading %s for BIRD's first configuration: %w", k, err)
		}
		rs = append(rs, list.Items...)
	}
	cfgPath, ctl, logPath := birdFiles(n)
	in, err := render.FromResources(n.Name, rs)
	if err != nil {
		return err
	}
	in.LogFile = logPath
	conf, err := render.Render(in)
	if err != nil {
		return fmt.Errorf("BIRD configuration of %s: %w", n.Name, err)
	}
	if err := os.WriteFile(cfgPath, []byte(conf), 0o644); err != nil {
		return err
	}
	if _, err := l.spawn("bird-"+n.Name, n.Netns, nil, "bird", "-f", "-c", cfgPath, "-s", ctl, "-P", filepath.Join(n.Dir, "bird.pid")); err != nil {
		return err
	}
	b := bird.Exec{Socket: ctl}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		cctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := b.Command(cctx, "show", "status")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("BIRD on %s does not answer on %s: %w\n%s", n.Name, ctl, err, l.logTail("bird-"+n.Name))
		}
	}
	_, err = l.spawn("confd-"+n.Name, "", env, filepath.Join(l.Bin, "confd"),
		"-bird-config", cfgPath, "-bird-socket", ctl, "-bird-log", logPath, "-log-level", "info")
	return err
}

// agentReady says why node n's agent is not ready yet ("" when it is):
// felix's dataplane in sync (its /readiness) and, with BGP, a session
// Established to every other node.
func (l *Lab) agentReady(ctx context.Context, n *NodeState) string {
	if why := felixReady(ctx, n.HealthPort); why != "" {
		return "felix: " + why
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

func felixReady(ctx context.Context, port int) string {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readiness", port), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return resp.Status
	}
	return ""
}

// bgpSessions maps each BGP peer address of node n to its session state
// (BIRD's protocol info, "Established" when up).
func (l *Lab) bgpSessions(ctx context.Context, n *NodeState) (map[string]string, error) {
	_, ctl, _ := birdFiles(n)
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	out, err := bird.Exec{Socket: ctl}.Command(ctx, "show", "protocols")
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
