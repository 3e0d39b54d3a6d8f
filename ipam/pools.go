package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
)

// Pool is an IPPool with its parsed CIDR.
type Pool struct {
	Name string
	CIDR netip.Prefix
	Spec v3.IPPoolSpec
}

// BlockBits is the pool's block prefix length, defaulted as Calico does.
func (p Pool) BlockBits() int {
	if p.Spec.BlockSize != 0 {
		return p.Spec.BlockSize
	}
	if p.CIDR.Addr().Is4() {
		return v3.DefaultIPv4BlockSize
	}
	return v3.DefaultIPv6BlockSize
}

// Version is 4 or 6.
func (p Pool) Version() int {
	if p.CIDR.Addr().Is4() {
		return 4
	}
	return 6
}

func (p Pool) allows(use v3.IPPoolAllowedUse) bool {
	if len(p.Spec.AllowedUses) == 0 {
		return use == v3.IPPoolAllowedUseWorkload || use == v3.IPPoolAllowedUseTunnel
	}
	return slices.Contains(p.Spec.AllowedUses, use)
}

func (p Pool) manual() bool {
	return p.Spec.AssignmentMode != nil && *p.Spec.AssignmentMode == v3.AssignmentModeManual
}

// ParsePools converts IPPools, skipping any whose CIDR does not parse.
func ParsePools(ps []v3.IPPool) []Pool {
	out := make([]Pool, 0, len(ps))
	for _, p := range ps {
		c, err := netip.ParsePrefix(p.Spec.CIDR)
		if err != nil {
			continue
		}
		out = append(out, Pool{Name: p.Name, CIDR: c.Masked(), Spec: p.Spec})
	}
	slices.SortFunc(out, func(a, b Pool) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// PoolFor returns the pool holding ip, if any.
func PoolFor(pools []Pool, ip netip.Addr) (Pool, bool) {
	ip = ip.Unmap()
	for _, p := range pools {
		if p.CIDR.Contains(ip) {
			return p, true
		}
	}
	return Pool{}, false
}

// PoolRequest says which pools an allocation may use.
type PoolRequest struct {
	Version int // 4 or 6
	// Requested names pools by name or CIDR (the ipv4pools / ipv6pools
	// annotations or the CNI config). When set they are used, in order,
	// regardless of node selectors, as Calico does.
	Requested []string
	// NodeLabels are the labels of the node the address is for.
	NodeLabels map[string]string
	// NamespaceLabels are the pod namespace's labels; nil skips pools'
	// namespaceSelectors.
	NamespaceLabels map[string]string
	// Use is what the address is for [default Workload].
	Use v3.IPPoolAllowedUse
}

// SelectPools returns the pools an allocation may use, in the order to try
// them. Requested pools must exist, be enabled and be of the right IP
// version. Otherwise the enabled, automatic pools of the version whose
// allowedUses include the use and whose node selector (and namespace
// selector, when namespace labels are known) match are used, by name.
func SelectPools(pools []Pool, req PoolRequest) ([]Pool, error) {
	use := req.Use
	if use == "" {
		use = v3.IPPoolAllowedUseWorkload
	}
	if len(req.Requested) > 0 {
		var out []Pool
		for _, r := range req.Requested {
			p, ok := findPool(pools, r)
			if !ok {
				return nil, fmt.Errorf("pool %q: %w (it names no IPPool by name or CIDR)", r, ErrUnknownPool)
			}
			if p.Version() != req.Version {
				return nil, fmt.Errorf("pool %q is IPv%d but an IPv%d pool was asked for: %w", r, p.Version(), req.Version, ErrInvalidArgs)
			}
			if p.Spec.Disabled {
				return nil, fmt.Errorf("pool %q: %w", r, ErrPoolDisabled)
			}
			if !p.allows(use) {
				return nil, fmt.Errorf("pool %q does not allow use %s: %w", r, use, ErrInvalidArgs)
			}
			if !slices.ContainsFunc(out, func(q Pool) bool { return q.Name == p.Name }) {
				out = append(out, p)
			}
		}
		return out, nil
	}
	var out []Pool
	for _, p := range pools {
		if p.Version() != req.Version || p.Spec.Disabled || p.manual() || !p.allows(use) {
			continue
		}
		if !matches(p.Spec.NodeSelector, req.NodeLabels) {
			continue
		}
		if req.NamespaceLabels != nil && p.Spec.NamespaceSelector != "" && !matches(p.Spec.NamespaceSelector, req.NamespaceLabels) {
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no enabled IPv%d pool for use %s selects this node: %w", req.Version, use, ErrNoPool)
	}
	return out, nil
}

func findPool(pools []Pool, nameOrCIDR string) (Pool, bool) {
	if c, err := netip.ParsePrefix(nameOrCIDR); err == nil {
		for _, p := range pools {
			if p.CIDR == c.Masked() {
				return p, true
			}
		}
		return Pool{}, false
	}
	for _, p := range pools {
		if p.Name == nameOrCIDR {
			return p, true
		}
	}
	return Pool{}, false
}

// matches evaluates a selector; one that does not parse matches nothing
// (the API rejects such pools on write).
func matches(sel string, labels map[string]string) bool {
	s, err := selector.Parse(sel)
	if err != nil {
		return false
	}
	return s.Evaluate(labels)
}

// PoolNames lists pool names for messages.
func PoolNames(ps []Pool) string {
	names := make([]string, len(ps))
	for i, p := range ps {
		names[i] = p.Name + " (" + p.CIDR.String() + ")"
	}
	return strings.Join(names, ", ")
}
