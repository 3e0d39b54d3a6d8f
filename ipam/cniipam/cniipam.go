package cniipam

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/ipam"
)

// Conf is the `ipam` section calico-ipam reads (Calico's keys).
type Conf struct {
	Type string `json:"type"`
	// AssignIPv4 and AssignIPv6 are "true" or "false" (strings, as in
	// Calico) [defaults "true" and "false"].
	AssignIPv4 *string `json:"assign_ipv4,omitempty"`
	AssignIPv6 *string `json:"assign_ipv6,omitempty"`
	// IPv4Pools and IPv6Pools restrict the pools (names or CIDRs); pod
	// annotations override them.
	IPv4Pools []string `json:"ipv4_pools,omitempty"`
	IPv6Pools []string `json:"ipv6_pools,omitempty"`
}

// ParseConf reads the ipam section out of a whole network configuration.
func ParseConf(netconf []byte) (Conf, error) {
	var n struct {
		IPAM Conf `json:"ipam"`
	}
	if err := json.Unmarshal(netconf, &n); err != nil {
		return Conf{}, types.NewError(types.ErrDecodingFailure, "network configuration is not valid JSON", err.Error())
	}
	for _, f := range []struct {
		name string
		v    *string
	}{{"ipam.assign_ipv4", n.IPAM.AssignIPv4}, {"ipam.assign_ipv6", n.IPAM.AssignIPv6}} {
		if f.v != nil && *f.v != "true" && *f.v != "false" {
			return Conf{}, types.NewError(types.ErrInvalidNetworkConfig, fmt.Sprintf("%s: %q must be \"true\" or \"false\"", f.name, *f.v), "")
		}
	}
	return n.IPAM, nil
}

// V4 and V6 say whether the conf asks for an address of the family
// (pool annotations may ask for one too).
func (c Conf) V4() bool { return c.AssignIPv4 == nil || *c.AssignIPv4 == "true" }
func (c Conf) V6() bool { return c.AssignIPv6 != nil && *c.AssignIPv6 == "true" }

// Request is one CNI invocation's IPAM inputs.
type Request struct {
	Network     string // the network name: handles are <network>.<containerID>
	ContainerID string
	// IfName is the container's interface (CNI_IFNAME); an interface
	// other than eth0 has a handle of its own (see HandleID).
	IfName string
	Node   string
	// Namespace and Pod name the Kubernetes pod (empty outside Kubernetes).
	Namespace, Pod string
	// Annotations are the pod's (ipv4pools, ipv6pools, ipAddrs).
	Annotations map[string]string
	// IPAddrs are specific addresses asked for outside annotations (the
	// IP key of CNI_ARGS, as the calico plugin passes them).
	IPAddrs []netip.Addr
	// NamespaceLabels are the labels of the pod's namespace, matched
	// against pools' namespaceSelectors; nil when unknown (no Kubernetes
	// access), which Calico matches as no labels.
	NamespaceLabels map[string]string
	Conf            Conf
}

// HandleID is the IPAM handle of a container's interface on a network:
// Calico's "<network>.<containerID>" for eth0 (or no interface named), and
// "<network>.<containerID>.<ifName>" for any other interface, so that a
// second interface of the same container on the same network (net1, as
// Multus names them) holds and releases its own addresses.
func HandleID(network, containerID, ifName string) string {
	if ifName == "" || ifName == DefaultIfName {
		return network + "." + containerID
	}
	return network + "." + containerID + "." + ifName
}

// DefaultIfName is the pod interface whose handle is Calico's.
const DefaultIfName = "eth0"

func (r Request) handle() string { return HandleID(r.Network, r.ContainerID, r.IfName) }

func (r Request) attrs() map[string]string {
	m := map[string]string{ipam.AttrNode: r.Node}
	if r.Pod != "" {
		m[ipam.AttrNamespace] = r.Namespace
		m[ipam.AttrPod] = r.Pod
	}
	return m
}

// Plugin runs CNI IPAM operations over an Allocator.
type Plugin struct {
	Alloc *ipam.Allocator
	// LockPath, when set, is a file flock'ed around ADD and DEL so that
	// CNI processes on one host take turns instead of racing on the same
	// block (Calico uses /var/run/calico/ipam.lock). An optimisation only.
	LockPath string
}

// DefaultLockPath is Calico's host-wide IPAM lock file.
const DefaultLockPath = "/var/run/calico/ipam.lock"

// Add allocates the container's addresses and returns them (/32, /128)
// with default routes for each family. A repeated ADD for the same
// container returns what it already holds.
func (p *Plugin) Add(ctx context.Context, req Request) (*current.Result, error) {
	if req.ContainerID == "" || req.Node == "" || req.Network == "" {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "calico-ipam needs a container ID, a network name and a node name", "")
	}
	ann, err := ipam.ParsePodAnnotations(req.Annotations)
	if err != nil {
		return nil, ToCNIError(err)
	}
	ann.IPAddrs = append(ann.IPAddrs, req.IPAddrs...)
	defer hostLock(ctx, p.LockPath)()
	h := req.handle()
	// Is this a repeated ADD? Asked together with the reads an allocation
	// needs (with a CacheTTL, AutoAssign then reuses them).
	var held []netip.Addr
	var herr error
	hch := make(chan struct{})
	go func() { defer close(hch); held, herr = p.Alloc.IPsByHandle(ctx, h) }()
	werr := p.Alloc.Warm(ctx, req.Node)
	<-hch
	if herr == nil && len(held) > 0 {
		return result(held), nil
	} else if herr != nil && !errors.Is(herr, ipam.ErrHandleNotFound) {
		return nil, ToCNIError(herr)
	}
	if werr != nil {
		return nil, ToCNIError(werr)
	}
	ips, err := Assign(ctx, p.Alloc, req, ann)
	if err != nil {
		return nil, ToCNIError(err)
	}
	return result(ips), nil
}

// Assign allocates req's addresses once the allocator is warm: exactly
// the specific addresses ann asks for (all or none), else one address per
// family the conf or ann's pool annotations ask for. It is the allocation
// both calico-ipam and the calico plugin (in-process) make; the callers
// turn errors into CNI errors.
func Assign(ctx context.Context, alloc *ipam.Allocator, req Request, ann ipam.PodRequest) ([]netip.Addr, error) {
	h := req.handle()
	if len(ann.IPAddrs) > 0 {
		var ips []netip.Addr
		for _, ip := range ann.IPAddrs {
			if err := alloc.AssignIP(ctx, ipam.AssignIPArgs{IP: ip, HandleID: h, Attrs: req.attrs(), Hostname: req.Node}); err != nil {
				if len(ips) > 0 {
					_, _ = alloc.ReleaseByHandle(context.WithoutCancel(ctx), h)
				}
				return nil, fmt.Errorf("annotation %s: %w", ipam.AnnotationIPAddrs, err)
			}
			ips = append(ips, ip)
		}
		return ips, nil
	}
	args := ipam.AutoAssignArgs{
		HandleID: h, Attrs: req.attrs(), Hostname: req.Node,
		IPv4Pools: req.Conf.IPv4Pools, IPv6Pools: req.Conf.IPv6Pools,
		NamespaceLabels: req.NamespaceLabels, Namespace: req.Namespace,
	}
	if req.Conf.V4() {
		args.Num4 = 1
	}
	if req.Conf.V6() {
		args.Num6 = 1
	}
	if len(ann.IPv4Pools) > 0 {
		args.IPv4Pools, args.Num4 = ann.IPv4Pools, 1
	}
	if len(ann.IPv6Pools) > 0 {
		args.IPv6Pools, args.Num6 = ann.IPv6Pools, 1
	}
	return alloc.AutoAssign(ctx, args)
}

func result(ips []netip.Addr) *current.Result {
	r := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	has := map[bool]bool{}
	for _, ip := range ips {
		r.IPs = append(r.IPs, &current.IPConfig{Address: net.IPNet{IP: ip.AsSlice(), Mask: net.CIDRMask(ip.BitLen(), ip.BitLen())}})
		has[ip.Is4()] = true
	}
	if has[true] {
		r.Routes = append(r.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}})
	}
	if has[false] {
		r.Routes = append(r.Routes, &types.Route{Dst: net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}})
	}
	return r
}

// Del releases the container's addresses. It is idempotent: nothing held
// is success.
func (p *Plugin) Del(ctx context.Context, req Request) error {
	if req.ContainerID == "" || req.Network == "" {
		return types.NewError(types.ErrInvalidEnvironmentVariables, "calico-ipam DEL needs a container ID and a network name", "")
	}
	defer hostLock(ctx, p.LockPath)()
	_, err := p.Alloc.ReleaseByHandle(ctx, req.handle())
	if err != nil && !errors.Is(err, ipam.ErrHandleNotFound) {
		return ToCNIError(err)
	}
	return nil
}

// Check verifies that the container still holds every address of
// prevResult (and holds some address at all).
func (p *Plugin) Check(ctx context.Context, req Request, prev *current.Result) error {
	held, err := p.Alloc.IPsByHandle(ctx, req.handle())
	if err != nil {
		return ToCNIError(err)
	}
	if len(held) == 0 {
		return types.NewError(types.ErrInternal, fmt.Sprintf("no address is allocated to %s", req.handle()), "")
	}
	if prev == nil {
		return nil
	}
	for _, c := range prev.IPs {
		ip, ok := netip.AddrFromSlice(c.Address.IP)
		if !ok || !slices.Contains(held, ip.Unmap()) {
			return types.NewError(types.ErrInternal, fmt.Sprintf("%s is in prevResult but not allocated to %s (it holds %v)", c.Address.IP, req.handle(), held), "")
		}
	}
	return nil
}

// GC releases this node's allocations on this network whose container is
// not among the valid attachments (cni.dev/valid-attachments). It returns
// the handles released.
func (p *Plugin) GC(ctx context.Context, network, node string, valid []types.GCAttachment) ([]string, error) {
	keep := map[string]bool{}
	for _, v := range valid {
		keep[HandleID(network, v.ContainerID, v.IfName)] = true
	}
	prefix := network + "."
	als, err := p.Alloc.ListAllocations(ctx, func(al ipam.Allocated) bool {
		return al.Attrs[ipam.AttrNode] == node && strings.HasPrefix(al.Handle, prefix) && !keep[al.Handle]
	})
	if err != nil {
		return nil, ToCNIError(err)
	}
	var released []string
	for _, al := range als {
		if slices.Contains(released, al.Handle) {
			continue
		}
		if _, err := p.Alloc.ReleaseByHandle(ctx, al.Handle); err != nil && !errors.Is(err, ipam.ErrHandleNotFound) {
			return released, ToCNIError(err)
		}
		released = append(released, al.Handle)
	}
	return released, nil
}

// Status fails (code 50) when the datastore does not answer or no pool
// can serve workloads.
func (p *Plugin) Status(ctx context.Context) error {
	if err := p.Alloc.Usable(ctx); err != nil {
		return types.NewError(types.ErrPluginNotAvailable, "calico-ipam cannot allocate: "+err.Error(), "")
	}
	return nil
}

// Plugin-specific CNI error codes (100 and up are the plugin's).
const (
	ErrCodePoolExhausted = 100 // no free address in the pools for this node
	ErrCodeBadPool       = 101 // unknown, disabled or no usable pool
	ErrCodeBadAddress    = 102 // requested address outside the pools, reserved or in use
	// ErrCodeDatastoreAccess: the datastore refused access (credentials,
	// certificates, permissions). 103 and 104 are the calico plugin's.
	ErrCodeDatastoreAccess = 105
)

// ToCNIError maps an IPAM error to a CNI error: datastore unreachable ->
// 11 (try again later), bad request -> 7, pool and address problems to the
// plugin codes above, anything else -> 999.
func ToCNIError(err error) *types.Error {
	var ce *types.Error
	if errors.As(err, &ce) {
		return ce
	}
	code := uint(types.ErrInternal)
	switch {
	case errors.Is(err, datastore.ErrAccessDenied):
		code = ErrCodeDatastoreAccess
	case errors.Is(err, datastore.ErrUnavailable), errors.Is(err, ipam.ErrTooManyRetries),
		errors.Is(err, context.DeadlineExceeded):
		code = types.ErrTryAgainLater
	case errors.Is(err, ipam.ErrPoolExhausted):
		code = ErrCodePoolExhausted
	case errors.Is(err, ipam.ErrUnknownPool), errors.Is(err, ipam.ErrPoolDisabled), errors.Is(err, ipam.ErrNoPool):
		code = ErrCodeBadPool
	case errors.Is(err, ipam.ErrNotInPool), errors.Is(err, ipam.ErrReserved), errors.Is(err, ipam.ErrInUse):
		code = ErrCodeBadAddress
	case errors.Is(err, ipam.ErrInvalidArgs):
		code = types.ErrInvalidNetworkConfig
	}
	return types.NewError(code, err.Error(), "")
}
