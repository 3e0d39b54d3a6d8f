package plugin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/cni-plugin/wiring"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/cniipam"
)

// Add wires a pod: IPAM, then the veth and routes, then the
// WorkloadEndpoint. A failure at any step undoes the earlier ones.
func (p *Plugin) Add(a *skel.CmdArgs) error {
	_, err := p.addReported(a)
	return err
}

// addReported is Add, returning the pod's addresses for the log.
func (p *Plugin) addReported(a *skel.CmdArgs) ([]any, error) {
	res, err := p.add(a)
	if err != nil {
		return nil, toCNI(err, "adding the pod network")
	}
	addrs := make([]string, len(res.IPs))
	for i, ip := range res.IPs {
		addrs[i] = ip.Address.String()
	}
	return []any{"addresses", strings.Join(addrs, ",")}, types.PrintResult(res, res.CNIVersion)
}

func (p *Plugin) add(a *skel.CmdArgs) (res *current.Result, err error) {
	c, err := p.parse(a)
	if err != nil {
		return nil, err
	}
	// Everything that can be refused is refused before any change.
	if c.idErr != nil {
		return nil, c.idErr
	}
	if c.conf.IPAM.Type == CalicoIPAM {
		// Read the ipam section once, and before any I/O.
		if c.ipam, err = parseIPAMConf(a.StdinData); err != nil {
			return nil, err
		}
	}
	if c.conf.DatastoreType == netconf.DatastoreKubernetes && c.id.orchestrator == "k8s" && a.IfName != cniipam.DefaultIfName {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables,
			fmt.Sprintf("CNI_IFNAME %q: with datastore_type kubernetes a pod has one interface, %s (its annotations describe that one only)", a.IfName, cniipam.DefaultIfName), "")
	}
	if a.Netns == "" {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is required for ADD", "")
	}
	tm := newPhaseTimer("ADD")
	defer tm.done()
	// The client first: on the Kubernetes datastore it starts its
	// connection (TLS handshake) now, alongside the checks below.
	client, err := p.NewClient(c.conf)
	if err != nil {
		return nil, err
	}
	defer client.Close()
	tm.mark("connect")
	// Fail before taking an address if the namespace is not there.
	if podNS, err := ns.GetNS(a.Netns); err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_NETNS is not a usable network namespace", err.Error())
	} else {
		podNS.Close()
	}
	hostNS, err := p.HostNS()
	if err != nil {
		return nil, fmt.Errorf("opening the node's namespace: %w", err)
	}
	defer hostNS.Close()
	if isNode, err := wiring.IsNodeNetNS(hostNS, a.Netns); err != nil || isNode {
		if err == nil {
			err = errors.New("a pod's interface and routes would be made on the node itself")
		}
		return nil, types.NewError(types.ErrInvalidNetNS, "CNI_NETNS "+a.Netns+" is the node's own network namespace, not a pod's", err.Error())
	}
	ctx, cancel := p.ctx()
	defer cancel()
	// The process lives for one call: cache what IPAM reads for its
	// lifetime, and read it (pools, settings, reservations, node labels,
	// affinities) in parallel with the pod's annotations.
	alloc := ipam.New(client, ipam.Config{CacheTTL: 5 * time.Second, ClaimLock: claimLock(p.HintDir, c.conf), CachedReads: true})
	tm.mark("checks")

	mtuFile := p.MTUFile
	if mtuFile == "" {
		mtuFile = netconf.DefaultMTUFile
	}
	mtu, err := c.conf.ResolveMTU(mtuFile)
	if err != nil {
		return nil, err
	}
	pod := wiring.Pod{
		NetNSPath: a.Netns, ContainerIf: a.IfName, HostIf: c.id.hostIf, Owner: c.id.handle,
		MTU: mtu, AllowIPForwarding: c.conf.ContainerSettings.AllowIPForwarding, HostNS: hostNS,
	}
	// A host veth already marked as this attachment's means a repeated
	// ADD: it keeps its veth and addresses if they are all there.
	_, repeated, err := wiring.Owned(hostNS, c.id.hostIf, c.id.handle, "")
	if err != nil {
		return nil, fmt.Errorf("looking for %s on the node: %w", c.id.hostIf, err)
	}

	// While IPAM talks to the datastore, create the veth pair: only its
	// addresses and routes wait for IPAM's answer.
	type prepared struct {
		prep *wiring.Prepared
		err  error
	}
	prepCh := make(chan prepared, 1)
	var prepTook time.Duration
	if !repeated {
		go func() {
			t0 := time.Now()
			prep, err := wiring.Prepare(pod, c.ipam.V6()) // Configure fixes up a wrong guess
			prepTook = time.Since(t0)
			prepCh <- prepared{prep, err}
		}()
	}
	addrs, ipamErr := p.ipam(ctx, c, a, client, alloc, repeated, tm)
	tm.mark("assign")
	var pr prepared
	if repeated {
		if ipamErr != nil {
			return nil, ipamErr
		}
		pod.Addrs = addrs
		if wired := wiring.Wired(pod); wired != nil {
			if err := p.recordEndpoint(ctx, client, c, a, addrs, wired.ContainerMAC); err != nil {
				return nil, fmt.Errorf("recording the WorkloadEndpoint: %w", err)
			}
			return result(c, a, addrs, wired), nil
		}
		// Something is missing: make the pair again, same addresses.
		pr.prep, pr.err = wiring.Prepare(pod, hasV6(addrs))
	} else {
		pr = <-prepCh
		tm.note("prepare", prepTook)
	}
	switch {
	case ipamErr != nil && pr.err == nil:
		pr.prep.Abandon()
		return nil, ipamErr
	case ipamErr != nil:
		return nil, ipamErr
	}
	defer func() {
		if err != nil {
			// Release with a fresh context: ctx may be what failed.
			rctx, rcancel := p.ctx()
			defer rcancel()
			if rerr := p.release(rctx, c, a, alloc); rerr != nil {
				err = fmt.Errorf("%w (and releasing the address failed: %v)", err, rerr)
			}
		}
	}()
	if pr.err != nil {
		return nil, types.NewError(ErrCodeWiring, "wiring the pod network", pr.err.Error())
	}
	// Address the pair and record the endpoint at the same time: they
	// are independent, and each undoes the other if it fails.
	wired := pr.prep.Result
	epErr := make(chan error, 1)
	go func() { epErr <- p.recordEndpoint(ctx, client, c, a, addrs, wired.ContainerMAC) }()
	cfgErr := pr.prep.Configure(addrs)
	recErr := <-epErr
	tm.mark("wiring+endpoint")
	switch {
	case cfgErr != nil:
		if recErr == nil {
			_ = p.delEndpoint(ctx, client, hostNS, c, a)
		}
		err = types.NewError(ErrCodeWiring, "wiring the pod network", cfgErr.Error())
		return nil, err
	case recErr != nil:
		_ = wiring.Teardown(hostNS, c.id.hostIf, c.id.handle, a.Netns)
		err = fmt.Errorf("recording the WorkloadEndpoint: %w", recErr)
		return nil, err
	}
	waitForPolicy(ctx, c, a.IfName)
	return result(c, a, addrs, wired), nil
}

func hasV6(addrs []net.IPNet) bool {
	for _, a := range addrs {
		if a.IP.To4() == nil {
			return true
		}
	}
	return false
}

// recordEndpoint writes (or takes over) the pod's WorkloadEndpoint.
func (p *Plugin) recordEndpoint(ctx context.Context, client datastore.Client, c *call, a *skel.CmdArgs, addrs []net.IPNet, mac string) error {
	if pods, ok := p.pods(client, c); ok {
		// Kubernetes mode: the WorkloadEndpoint is derived from the pod.
		return pods.Annotate(ctx, c.id.namespace, c.id.pod, a.ContainerID, addrs)
	}
	nets := make([]string, len(addrs))
	for i, n := range addrs {
		nets[i] = n.String()
	}
	profiles := []string{c.conf.Name}
	if c.id.orchestrator == "k8s" {
		profiles = []string{"kns." + c.id.namespace}
	}
	wep := &v3.WorkloadEndpoint{
		TypeMeta: metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: c.id.wepName, Namespace: c.id.namespace, Labels: map[string]string{
			"projectcalico.org/namespace":    c.id.namespace,
			"projectcalico.org/orchestrator": c.id.orchestrator,
		}},
		Spec: v3.WorkloadEndpointSpec{
			Orchestrator: c.id.orchestrator, Workload: c.id.workload, Node: c.node,
			ContainerID: a.ContainerID, Pod: c.id.pod, Endpoint: a.IfName,
			IPNetworks: nets, Profiles: profiles, InterfaceName: c.id.hostIf, MAC: mac,
		},
	}
	if pe := c.podEndpoint; pe != nil {
		// Read from Kubernetes (etcd mode with a kubeconfig): the pod's
		// labels, profiles, service account and ports, as Calico's
		// plugin records them.
		wep.Labels = pe.Labels
		wep.GenerateName = pe.GenerateName
		wep.Spec.Profiles = pe.Spec.Profiles
		wep.Spec.ServiceAccountName = pe.Spec.ServiceAccountName
		wep.Spec.Ports = pe.Spec.Ports
		wep.Spec.AllowSpoofedSourcePrefixes = pe.Spec.AllowSpoofedSourcePrefixes
	}
	_, err := client.Create(ctx, wep)
	if errors.Is(err, datastore.ErrAlreadyExists) {
		// A record left by an earlier sandbox of the same pod: this ADD
		// owns the name now.
		cur, gerr := client.Get(ctx, datastore.KeyOf(wep))
		if gerr != nil {
			return gerr
		}
		wep.ResourceVersion = cur.GetResourceVersion()
		_, err = client.Update(ctx, wep)
	}
	return err
}

func result(c *call, a *skel.CmdArgs, addrs []net.IPNet, wired *wiring.Result) *current.Result {
	zero := 1
	res := &current.Result{
		CNIVersion: c.conf.CNIVersion,
		Interfaces: []*current.Interface{
			{Name: c.id.hostIf, Mac: wired.HostMAC},
			{Name: a.IfName, Mac: wired.ContainerMAC, Sandbox: a.Netns},
		},
	}
	if res.CNIVersion == "" {
		res.CNIVersion = current.ImplementedSpecVersion
	}
	for _, n := range addrs {
		res.IPs = append(res.IPs, &current.IPConfig{Interface: &zero, Address: n})
	}
	v4, v6 := wired.DefaultV4, wired.DefaultV6
	if v4 {
		res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}, GW: wiring.GatewayIPv4.To4()})
	}
	if v6 {
		res.Routes = append(res.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}, GW: wiring.HostLinkLocalIPv6})
	}
	return res
}

// readPod reads the pod from Kubernetes in etcd mode.
func (p *Plugin) readPod(ctx context.Context, c *call) (PodInfo, error) {
	if p.PodReaderFor == nil {
		return PodInfo{}, &netconf.Error{Code: types.ErrInvalidNetworkConfig, Field: "kubernetes.kubeconfig",
			Msg: "with policy type k8s and a kubeconfig the pod is read from Kubernetes, which this binary cannot do: install calico-k8s beside calico"}
	}
	r, err := p.PodReaderFor(c.conf)
	if err != nil {
		return PodInfo{}, err
	}
	return r.Read(ctx, c.id.namespace, c.id.pod)
}

// ipam reads the pod's IPAM inputs (Kubernetes mode, or etcd mode with a
// kubeconfig, where the rest of the pod is kept for its endpoint): its
// annotations, its namespace's pool annotations and labels, in parallel
// with warming the allocator's view; then it assigns the pod's addresses.
func (p *Plugin) ipam(ctx context.Context, c *call, a *skel.CmdArgs, client datastore.Client, alloc *ipam.Allocator, repeated bool, tm *phaseTimer) ([]net.IPNet, error) {
	var info PodInfo
	var reqErr error
	reqDone := make(chan struct{})
	go func() {
		defer close(reqDone)
		if pods, ok := p.pods(client, c); ok {
			info, reqErr = pods.Request(ctx, c.id.namespace, c.id.pod)
			return
		}
		if readsPodFromKubernetes(c.conf, c.id.orchestrator) {
			info, reqErr = p.readPod(ctx, c)
			c.podEndpoint = info.Endpoint
		}
	}()
	var warmErr error
	var held []netip.Addr
	var heldErr error
	if c.conf.IPAM.Type == CalicoIPAM {
		// A repeated ADD gets what its handle already holds, as
		// calico-ipam gives it: asked alongside the reads an allocation
		// needs, when an earlier ADD may have written it (attempts.go).
		heldDone := make(chan struct{})
		marks := attemptsIn(p.HintDir)
		go func() {
			defer close(heldDone)
			if repeated || marks.mayHold(c.id.handle) {
				held, heldErr = alloc.IPsByHandle(ctx, c.id.handle)
			} else {
				heldErr = ipam.ErrHandleNotFound
			}
		}()
		hints := loadBlockHints(p.HintDir, c.conf, c.node)
		warmErr = alloc.Warm(ctx, c.node, hints.read...)
		defer func() { hints.save(alloc.AffineBlocks(c.node)) }()
		<-heldDone
	}
	<-reqDone
	if reqErr != nil {
		return nil, reqErr
	}
	if c.conf.IPAM.Type == CalicoIPAM && (heldErr == nil || errors.Is(heldErr, ipam.ErrHandleNotFound)) {
		p.markAttempt(c)
	}
	switch {
	case heldErr != nil && !errors.Is(heldErr, ipam.ErrHandleNotFound):
		return nil, heldErr
	case len(held) > 0:
		out := make([]net.IPNet, len(held))
		for i, ip := range held {
			out[i] = hostPrefix(ip.AsSlice())
		}
		return out, nil
	}
	if warmErr != nil {
		return nil, warmErr
	}
	tm.mark("read")
	return p.assign(ctx, c, a, alloc, info)
}

// markAttempt marks the attachment's handle as written (attempts.go)
// before its first write, or when a repeated ADD found it.
func (p *Plugin) markAttempt(c *call) {
	if err := attemptsIn(p.HintDir).start(c.id.handle); err != nil {
		// The next ADD of this attachment reads the handle anyway unless
		// the folder is usable again (then see attempts.go).
		slog.Warn("could not mark the IPAM handle as written; a repeated ADD may not find its addresses", "handle", c.id.handle, "err", err)
	}
}
