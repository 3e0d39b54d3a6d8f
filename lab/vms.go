package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/internal/vmtest"
	"github.com/tabbynet/tabby/internal/vmtest/guest"
	"github.com/tabbynet/tabby/lab/internal/harness"
)

// A lab whose nodes are VMs (`tabby-lab up --vms`): each node is a qemu
// VM booting Debian's own kernel (internal/vmtest: the image from Debian's
// packages, cached in ~/.cache/tabby-vm), for what this machine's kernel
// lacks (ipip, wireguard, dummy). The VMs share a private L2 segment in
// the namespace <prefix>-seg (its bridges route between the model's two
// subnets, 172.30.<s+1>.0/24); etcd stays on the host and is reached over
// the segment through `tabby-lab proxy` listening on the segment's router
// (<router>:2379). In each VM the guest agent (tabby-vmguest) runs the
// real calico-node (Calico's default paths: each VM has its own file
// system) and wires the model's pods with the real calico plugin, each
// serving with `tabby-lab serve`. The other verbs reach a node through its
// agent over the segment (probe, exec, status, apply's wait); qemu and the
// proxy are spawned like every lab process (marked, own session), so down
// removes a VM lab as any other. Etcd datastore only.

// VMNode says that a node is a VM and how to reach its agent.
type VMNode struct {
	Segment string `json:"segment"` // the segment's namespace
	ID      int    `json:"id"`
	Addr    string `json:"addr"` // the node's underlay address (the agent's)
}

// guest is the node's agent.
func (v *VMNode) guest() (*vmtest.Guest, func(), error) {
	seg, err := vmtest.OpenSegment(v.Segment)
	if err != nil {
		return nil, nil, err
	}
	addr, err := netip.ParseAddr(v.Addr)
	if err != nil {
		return nil, nil, err
	}
	return vmtest.NewGuest(seg, addr), func() { _ = seg.Close() }, nil
}

// vmExec runs argv on a VM node (in pod's namespace when pod is set).
func (v *VMNode) vmExec(pod string, env []string, argv ...string) (guest.ExecResult, error) {
	g, done, err := v.guest()
	if err != nil {
		return guest.ExecResult{}, err
	}
	defer done()
	return g.Exec(guest.ExecRequest{Argv: argv, Env: env, Pod: pod})
}

// fetchReport reads the node's felix endpoint report through its agent
// (the report is served on the VM's own loopback).
func (v *VMNode) fetchReport() (*daemon.Report, error) {
	r, err := v.vmExec("", nil, "/opt/tabby/bin/tabby-lab", "get", "http://"+healthAddr+daemon.EndpointReportPath)
	if err == nil && r.Code != 0 {
		err = fmt.Errorf("%s", strings.TrimSpace(r.Output))
	}
	if err != nil {
		return nil, fmt.Errorf("felix's endpoint report: %w", err)
	}
	var rep daemon.Report
	if err := json.Unmarshal([]byte(r.Output), &rep); err != nil {
		return nil, fmt.Errorf("felix's endpoint report: %w", err)
	}
	return &rep, nil
}

// upVMs builds the nodes, agents and pods of a VM lab (after the
// datastore and the model's resources) and waits for the full matrix.
func (l *Lab) upVMs(ctx context.Context, start time.Time) error {
	m := l.State.Model
	if l.State.Datastore != DatastoreEtcd {
		return errors.New("--vms runs on the etcd datastore only")
	}
	img, err := vmtest.EnsureImage(ctx)
	if err != nil {
		return err
	}
	share := filepath.Join(l.Dir, "vm-share")
	if err := vmtest.BuildGuestBinaries(filepath.Join(share, "bin")); err != nil {
		return err
	}
	b, err := os.ReadFile(filepath.Join(l.Bin, "tabby-lab"))
	if err == nil {
		err = os.WriteFile(filepath.Join(share, "bin", "tabby-lab"), b, 0o755)
	}
	if err != nil {
		return err
	}
	l.step("VM image %s and guest binaries ready (%s)", img.Dir, since(start))
	seg, err := l.vmSegment()
	if err != nil {
		return err
	}
	defer seg.Close()
	if err := l.vmBoot(ctx, seg, img, share); err != nil {
		return err
	}
	l.step("%d VMs booted, agents answering (%s)", len(l.State.Nodes), since(start))
	for _, n := range l.State.Nodes {
		env := vmtest.CalicoNodeEnv(n.Name, m.networkingBackend(), l.vmEtcd())
		g, done, err := n.VM.guest()
		if err != nil {
			return err
		}
		err = g.CallTimeout(time.Minute, "/spawn", guest.SpawnRequest{Name: "calico-node", Argv: []string{"calico-node"}, Env: env}, nil)
		done()
		if err != nil {
			return fmt.Errorf("starting calico-node on %s: %w", n.Name, err)
		}
	}
	if err := l.vmWaitReady(ctx, 5*time.Minute); err != nil {
		return err
	}
	l.step("calico-node ready on every VM (%s networking) (%s)", m.networkingBackend(), since(start))
	if err := l.vmPods(ctx); err != nil {
		return err
	}
	l.step("%d pods wired by the calico CNI plugin in the VMs, serving (%s)", len(l.State.Pods), since(start))
	n, err := l.waitConnected(ctx, 2*time.Minute)
	if err != nil {
		return err
	}
	l.State.Phase = "up"
	if err := l.save(); err != nil {
		return err
	}
	l.step("lab up on VMs: all %d probes allowed (%s)", n, since(start))
	return nil
}

// vmProbeTimeout is the least time a probe from a VM is given.
const vmProbeTimeout = 3 * time.Second

// vmEtcd is etcd as the VMs reach it: the proxy on the segment's router.
func (l *Lab) vmEtcd() string {
	return "http://" + vmtest.RouterAddr(0).Addr().String() + ":2379"
}

// vmSegment creates the segment and the etcd proxy on it, and records
// the nodes (VMs, not namespaces) in the state.
func (l *Lab) vmSegment() (*vmtest.Segment, error) {
	subnets := 1
	for _, n := range l.State.Model.Nodes {
		subnets = max(subnets, n.Subnet+1)
	}
	seg, err := vmtest.NewSegment(l.State.Prefix, subnets)
	if err != nil {
		return nil, err
	}
	etcd := strings.TrimPrefix(l.State.EtcdURL, "http://")
	if _, err := l.spawn("etcd-proxy", "", nil, filepath.Join(l.Bin, "tabby-lab"), "proxy", "--listen", ":2379", "--to", etcd,
		filepath.Join(harness.NetnsDir, seg.Netns)); err != nil {
		seg.Close()
		return nil, err
	}
	l.State.Nodes = nil
	for i, mn := range l.State.Model.Nodes {
		addr := vmtest.NodeAddr(mn.Subnet, i)
		l.State.Nodes = append(l.State.Nodes, NodeState{Name: mn.Name, Subnet: mn.Subnet, Addr: addr.String(),
			Dir: filepath.Join(l.Dir, "nodes", mn.Name), VM: &VMNode{Segment: seg.Netns, ID: i, Addr: addr.Addr().String()}})
	}
	return seg, l.save()
}

// vmBoot writes the share and starts one qemu per node (a marked lab
// process), then waits until every agent answers.
func (l *Lab) vmBoot(ctx context.Context, seg *vmtest.Segment, img vmtest.Image, share string) error {
	cfg := guest.Config{CNI: vmtest.CNIConfList(l.vmEtcd())}
	for _, n := range l.State.Nodes {
		cfg.Nodes = append(cfg.Nodes, vmtest.GuestNode(n.VM.ID, n.Name, n.Subnet))
	}
	if err := vmtest.WriteShare(share, cfg); err != nil {
		return err
	}
	for _, n := range l.State.Nodes {
		tap := "tap" + strconv.Itoa(n.VM.ID)
		if err := seg.AddTap(tap, n.Subnet); err != nil {
			return err
		}
		argv, err := vmtest.VMConfig{Image: img, ID: n.VM.ID, Segment: seg, Tap: tap, MAC: vmtest.NodeMAC(n.VM.ID), Share: share}.Command()
		if err != nil {
			return err
		}
		if _, err := l.spawn("qemu-"+n.Name, "", nil, argv...); err != nil {
			return err
		}
	}
	return l.vmUntil(ctx, 5*time.Minute, "agent answering", func(n NodeState) string {
		if _, err := n.VM.vmExec("", nil, "true"); err != nil {
			return err.Error()
		}
		return ""
	})
}

// vmWaitReady waits for calico-node's readiness probe on every VM.
func (l *Lab) vmWaitReady(ctx context.Context, timeout time.Duration) error {
	return l.vmUntil(ctx, timeout, "calico-node ready", func(n NodeState) string { return l.vmAgentProbe(n) })
}

// vmAgentProbe is calico-node's readiness probe on a VM node: "" when
// ready, else its message.
func (l *Lab) vmAgentProbe(n NodeState) string {
	env := vmtest.CalicoNodeEnv(n.Name, l.State.Model.networkingBackend(), l.vmEtcd())
	r, err := n.VM.vmExec("", env, append([]string{"calico-node"}, l.readyFlags()...)...)
	switch {
	case err != nil:
		return err.Error()
	case r.Code != 0:
		return strings.TrimSpace(r.Output)
	}
	return ""
}

// vmUntil polls check on every node until all return "" or timeout,
// naming the nodes that did not.
func (l *Lab) vmUntil(ctx context.Context, timeout time.Duration, what string, check func(NodeState) string) error {
	deadline := time.Now().Add(timeout)
	for {
		var lagging []string
		var mu sync.Mutex
		_ = parallel(len(l.State.Nodes), func(i int) error {
			if why := check(l.State.Nodes[i]); why != "" {
				mu.Lock()
				lagging = append(lagging, l.State.Nodes[i].Name+": "+why)
				mu.Unlock()
			}
			return nil
		})
		if len(lagging) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			slices.Sort(lagging)
			return fmt.Errorf("VMs not %s after %s (consoles and logs in %s): %v", what, timeout, filepath.Join(l.Dir, "vm-share"), lagging)
		}
		time.Sleep(time.Second)
	}
}

// vmPods wires every pod of the model in its node's VM, serving with
// `tabby-lab serve`, and labels its endpoint as kube-controllers would.
func (l *Lab) vmPods(ctx context.Context) error {
	m := l.State.Model
	nodes := map[string]NodeState{}
	for _, n := range l.State.Nodes {
		nodes[n.Name] = n
	}
	pods := make([]PodState, len(m.Pods))
	err := parallel(len(m.Pods), func(i int) error {
		p := m.Pods[i]
		n := nodes[p.Node]
		var ports []string
		for _, pt := range p.Ports {
			ports = append(ports, pt.String())
		}
		req := guest.PodRequest{Namespace: p.Namespace, Name: p.Name,
			Serve: []string{"/opt/tabby/bin/tabby-lab", "serve", "--id", p.Key(), "--ports", strings.Join(ports, ",")}}
		g, done, err := n.VM.guest()
		if err != nil {
			return err
		}
		defer done()
		var res guest.PodResult
		if err := g.CallTimeout(3*time.Minute, "/pod/add", req, &res); err != nil {
			return fmt.Errorf("pod %s on %s: %w", p.Key(), n.Name, err)
		}
		pods[i] = PodState{Namespace: p.Namespace, Name: p.Name, Node: p.Node, Ports: p.Ports, IP: res.IP,
			ContainerID: "cid-" + n.Name + "-" + p.Name}
		return l.labelEndpoint(ctx, p)
	})
	l.State.Pods = nil
	for _, p := range pods {
		if p.Name != "" {
			l.State.Pods = append(l.State.Pods, p)
		}
	}
	if serr := l.save(); err == nil {
		err = serr
	}
	return err
}

// vmBGPSessions is BIRD's view of the mesh on a VM node (birdc in the VM,
// at calico-node's default socket).
func (l *Lab) vmBGPSessions(n NodeState) (map[string]string, error) {
	r, err := n.VM.vmExec("", nil, "birdc", "-s", "/var/run/calico/bird.ctl", "show", "protocols")
	if err == nil && r.Code != 0 {
		err = errors.New(strings.TrimSpace(r.Output))
	}
	if err != nil {
		return nil, fmt.Errorf("birdc show protocols: %w", err)
	}
	res := map[string]string{}
	for name, p := range bird.ParseProtocols(r.Output) {
		if addr, ok := strings.CutPrefix(name, "Mesh_"); ok {
			res[strings.ReplaceAll(addr, "_", ".")] = p.Info
		}
	}
	return res, nil
}

// execVM runs a command on a VM node, or in a pod's namespace in its VM;
// its output is printed once it ends (the agent runs it to completion).
func (l *Lab) execVM(target string, argv []string) error {
	if len(argv) == 0 {
		return fmt.Errorf("no command: tabby-lab exec %s -- <command>", target)
	}
	node, pod := target, ""
	for _, p := range l.State.Pods {
		if p.Key() == target {
			node, pod = p.Node, p.Key()
		}
	}
	for _, n := range l.State.Nodes {
		if n.Name != node {
			continue
		}
		r, err := n.VM.vmExec(pod, nil, argv...)
		if err != nil {
			return err
		}
		fmt.Print(r.Output)
		if r.Code != 0 {
			return fmt.Errorf("exit status %d", r.Code)
		}
		return nil
	}
	return fmt.Errorf("no pod or node %q in the lab (see tabby-lab status)", target)
}

// probeVMs is Probe for a VM lab: each source pod's probes go to its
// node's agent in one batch (run there at once, inside the pod).
func (l *Lab) probeVMs(jobs []ProbeResult, timeout time.Duration) ([]ProbeResult, error) {
	// Under software emulation a probe's goroutine, namespace switch and
	// handshake take far longer than on the host: a short timeout would
	// report allowed flows as denied.
	timeout = max(timeout, vmProbeTimeout)
	pods := map[string]PodState{}
	for _, p := range l.State.Pods {
		pods[p.Key()] = p
	}
	reqs := make([]guest.ProbeRequest, len(jobs))
	node := make([]string, len(jobs))
	for i, j := range jobs {
		pts, err := ParsePorts(j.Port)
		if err != nil {
			return nil, err
		}
		pt := pts[0]
		to := pods[j.To]
		reqs[i] = guest.ProbeRequest{From: j.From, Proto: strings.ToLower(pt.Protocol), Dst: to.IP, Port: pt.Port,
			Want: to.Key(), TimeoutMillis: int(timeout.Milliseconds())}
		node[i] = pods[j.From].Node
	}
	err := parallel(len(l.State.Nodes), func(i int) error {
		n := l.State.Nodes[i]
		var idx []int
		var batch []guest.ProbeRequest
		for j := range reqs {
			if node[j] == n.Name {
				idx, batch = append(idx, j), append(batch, reqs[j])
			}
		}
		g, done, err := n.VM.guest()
		if err != nil {
			return err
		}
		defer done()
		var res []guest.ProbeResult
		if err := g.CallTimeout(timeout+time.Minute, "/probes", batch, &res); err != nil {
			return fmt.Errorf("probing from %s: %w", n.Name, err)
		}
		if len(res) != len(batch) {
			return fmt.Errorf("probing from %s: %d answers to %d probes", n.Name, len(res), len(batch))
		}
		for k, j := range idx {
			jobs[j].Allowed, jobs[j].Detail = res[k].Error == "", shortDetail(res[k].Error)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortResults(jobs)
	return jobs, nil
}

// shortDetail words a failed probe as probeOne does.
func shortDetail(s string) string {
	switch {
	case s == "", strings.HasPrefix(s, "answered by"):
		return s
	case strings.Contains(s, "timeout"), strings.Contains(s, "deadline exceeded"):
		return "timeout"
	case strings.Contains(s, "refused"):
		return "refused"
	}
	return s
}
