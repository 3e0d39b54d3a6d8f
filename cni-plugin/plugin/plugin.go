package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/cni-plugin/netconf"
	"github.com/tabbynet/tabby/cni-plugin/wiring"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/dsconfig"
	"github.com/tabbynet/tabby/ipam"
	"github.com/tabbynet/tabby/ipam/cniipam"
)

// CalicoIPAM is the IPAM type served in-process.
const CalicoIPAM = "calico-ipam"

// Plugin carries the plugin's dependencies; the zero value is not usable,
// use New.
type Plugin struct {
	// Hostname falls back as the node name [os.Hostname].
	Hostname func() (string, error)
	// NewClient connects to the configured datastore.
	NewClient func(*netconf.NetConf) (datastore.Client, error)
	// HostNS is the node's namespace, where host veths and routes go
	// [the current namespace].
	HostNS func() (ns.NetNS, error)
	// Exec runs delegated IPAM plugins [libcni's default].
	Exec invoke.Exec
	// Timeout bounds one invocation [30s].
	Timeout time.Duration
	// HintDir keeps the node's affine IPAM blocks between calls (see
	// blockhints.go); empty: no hints [DefaultHintDir].
	HintDir string
	// PodsFor gives Pod access when the datastore is the Kubernetes API
	// (nil in a binary built without Kubernetes support).
	PodsFor func(datastore.Client) (Pods, bool)
	// MTUFile is calico-node's MTU file, read when the config sets no
	// mtu [netconf.DefaultMTUFile].
	MTUFile string
	// PodReaderFor reads pods from Kubernetes in etcd mode when the
	// network config gives a kubeconfig and policy type k8s (see
	// PodReader; nil in a binary built without Kubernetes support, which
	// then refuses such calls rather than write endpoints without the
	// pod's labels).
	PodReaderFor func(*netconf.NetConf) (PodReader, error)
	// LogStderr receives the plugin's log besides its log file [os.Stderr].
	LogStderr io.Writer
}

// pods returns Pod access for a Kubernetes pod's eth0 on the Kubernetes
// datastore (the pod's annotations describe that interface only).
func (p *Plugin) pods(client datastore.Client, c *call) (Pods, bool) {
	if p.PodsFor == nil || c.id.orchestrator != "k8s" || c.id.ifName != cniipam.DefaultIfName {
		return nil, false
	}
	return p.PodsFor(client)
}

// New returns a Plugin with production dependencies, its datastore
// clients built from the backends the binary links in.
func New(backends dsconfig.Backends) *Plugin {
	hints := hintDir()
	return &Plugin{
		Hostname:  os.Hostname,
		NewClient: clientFor(backends, filepath.Join(hints, tlsSessionFile)),
		HostNS:    ns.GetCurrentNS,
		Timeout:   30 * time.Second,
		HintDir:   hints,
	}
}

// tlsSessionFile, in the hint folder, keeps the Kubernetes API server's
// TLS session for the next call to resume (root-only; see
// datastore/kdd/tlssession.go).
const tlsSessionFile = "kdd-tls-session"

// clientFor builds the datastore client the network config names.
func clientFor(backends dsconfig.Backends, tlsSession string) func(*netconf.NetConf) (datastore.Client, error) {
	return func(c *netconf.NetConf) (datastore.Client, error) {
		spec := c.DatastoreSpec(os.Getenv)
		// A pod ADD should fail fast when the datastore is down: the
		// runtime retries, and a healthy datastore answers in milliseconds.
		spec.RequestTimeout = 3 * time.Second
		spec.OneCall = true
		spec.TLSSessionFile = tlsSession
		client, err := backends.New(spec)
		if err != nil {
			return nil, netconf.DatastoreConfigError(err)
		}
		return client, nil
	}
}

// Funcs returns skel's callbacks.
func (p *Plugin) Funcs() skel.CNIFuncs {
	return skel.CNIFuncs{Add: p.logged("ADD", p.addReported), Del: p.logged("DEL", plain(p.Del)), Check: p.logged("CHECK", plain(p.Check)),
		Status: p.logged("STATUS", plain(p.Status)), GC: p.logged("GC", plain(p.GC))}
}

// call is one invocation's parsed input.
type call struct {
	ipam cniipam.Conf // calico-ipam's section (ADD only)
	conf *netconf.NetConf
	args *netconf.Args
	node string
	id   identity
	// idErr says the pod's identity (CNI_ARGS) is unusable: ADD and
	// CHECK refuse it, DEL still cleans up what the container ID names.
	idErr error
	// podEndpoint holds what the pod gives its WorkloadEndpoint when read
	// from Kubernetes in etcd mode (nil otherwise).
	podEndpoint *v3.WorkloadEndpoint
}

// identity says who the pod is and how its records are named.
type identity struct {
	orchestrator string // "k8s" or "cni"
	namespace    string
	pod          string
	workload     string
	ifName       string
	handle       string // the IPAM handle, also the attachment's mark on its host veth
	wepName      string
	hostIf       string
}

func (p *Plugin) parse(a *skel.CmdArgs) (*call, error) {
	conf, err := netconf.Parse(a.StdinData)
	if err != nil {
		return nil, err
	}
	args, err := netconf.ParseArgs(a.Args)
	if err != nil {
		return nil, err
	}
	node, err := conf.ResolveNodename(p.Hostname)
	if err != nil {
		return nil, err
	}
	if a.ContainerID == "" {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID is required", "")
	}
	if a.IfName == "" {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "CNI_IFNAME is required", "")
	}
	c := &call{conf: conf, args: args, node: node, idErr: args.ValidatePod()}
	c.id = identify(conf.Name, node, a.ContainerID, a.IfName, args)
	return c, nil
}

// identify names the pod's records. The IPAM handle is Calico's
// "<network name>.<container ID>" (k8s-pod-network.<id> with Calico's
// manifests) for eth0, with the interface appended for any other (see
// cniipam.HandleID), so GC can tell this network's allocations from
// others' and each interface holds its own addresses.
func identify(network, node, containerID, ifName string, args *netconf.Args) identity {
	handle := cniipam.HandleID(network, containerID, ifName)
	if args.IsKubernetes() {
		ns, pod := string(args.K8S_POD_NAMESPACE), string(args.K8S_POD_NAME)
		return identity{
			orchestrator: "k8s", namespace: ns, pod: pod, workload: ns + "." + pod, ifName: ifName,
			handle:  handle,
			wepName: escapedName(node, "k8s", pod, ifName),
			hostIf:  wiring.HostVethNameForPodInterface(ns, pod, ifName),
		}
	}
	return identity{
		orchestrator: "cni", namespace: "default", workload: containerID, ifName: ifName,
		handle:  handle,
		wepName: escapedName(node, "cni", containerID, ifName),
		hostIf:  wiring.HostVethNameForContainer(containerID, ifName),
	}
}

// escapedName builds Calico's WorkloadEndpoint name: the parts joined by
// '-', with each '-' inside a part doubled so the name parses back.
func escapedName(parts ...string) string {
	for i, p := range parts {
		parts[i] = strings.ReplaceAll(p, "-", "--")
	}
	return strings.Join(parts, "-")
}

func (p *Plugin) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), p.Timeout)
}

// parseIPAMConf reads the ipam section as calico-ipam does, and refuses
// one that asks for no address at all.
func parseIPAMConf(stdin []byte) (cniipam.Conf, error) {
	conf, err := cniipam.ParseConf(stdin)
	if err == nil && !conf.V4() && !conf.V6() {
		err = &netconf.Error{Code: types.ErrInvalidNetworkConfig, Field: "ipam.assign_ipv4", Msg: "both assign_ipv4 and assign_ipv6 are off: the pod would get no address"}
	}
	return conf, err
}

// assign gets the pod's addresses: in-process for calico-ipam, through the
// configured plugin otherwise. release undoes it.
func (p *Plugin) assign(ctx context.Context, c *call, a *skel.CmdArgs, alloc *ipam.Allocator, pod PodInfo) ([]net.IPNet, error) {
	if c.conf.IPAM.Type != CalicoIPAM {
		r, err := invoke.DelegateAdd(ctx, c.conf.IPAM.Type, a.StdinData, p.Exec)
		if err != nil {
			return nil, fmt.Errorf("IPAM plugin %s: %w", c.conf.IPAM.Type, err)
		}
		res, err := current.NewResultFromResult(r)
		if err != nil {
			return nil, err
		}
		var out []net.IPNet
		for _, ip := range res.IPs {
			out = append(out, hostPrefix(ip.Address.IP))
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("IPAM plugin %s returned no address", c.conf.IPAM.Type)
		}
		return out, nil
	}
	req := cniipam.Request{Network: c.conf.Name, ContainerID: a.ContainerID, IfName: a.IfName, Node: c.node, Conf: c.ipam,
		NamespaceLabels: pod.NamespaceLabels}
	if c.id.orchestrator == "k8s" {
		req.Namespace, req.Pod = c.id.namespace, c.id.pod
	}
	ips, err := cniipam.Assign(ctx, alloc, req, pod.Request)
	if err != nil {
		return nil, err
	}
	out := make([]net.IPNet, len(ips))
	for i, ip := range ips {
		out[i] = hostPrefix(ip.AsSlice())
	}
	return out, nil
}

func (p *Plugin) release(ctx context.Context, c *call, a *skel.CmdArgs, alloc *ipam.Allocator) error {
	if c.conf.IPAM.Type != CalicoIPAM {
		if err := invoke.DelegateDel(ctx, c.conf.IPAM.Type, a.StdinData, p.Exec); err != nil {
			return fmt.Errorf("IPAM plugin %s: %w", c.conf.IPAM.Type, err)
		}
		return nil
	}
	if _, err := alloc.ReleaseByHandle(ctx, c.id.handle); err != nil && !errors.Is(err, ipam.ErrHandleNotFound) {
		return err
	}
	attemptsIn(p.HintDir).done(c.id.handle)
	return nil
}

func hostPrefix(ip net.IP) net.IPNet {
	if v4 := ip.To4(); v4 != nil {
		return net.IPNet{IP: v4, Mask: net.CIDRMask(32, 32)}
	}
	return net.IPNet{IP: ip, Mask: net.CIDRMask(128, 128)}
}

func toAddr(n net.IPNet) netip.Addr {
	a, _ := netip.AddrFromSlice(n.IP)
	return a.Unmap()
}
