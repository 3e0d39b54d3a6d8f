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
	// regardless of node and namespace selectors and of assignmentMode,
	// as Calico does (libcalico-go ipam determinePools).
	Requested []string
	// NodeLabels are the labels of the node the address is for.
	NodeLabels map[string]string
	// NamespaceLabels are the labels of the pod's namespace, matched
	// against pools' namespaceSelectors. nil (no namespace known: no
	// Kubernetes access, or not a pod) is matched as no labels, as
	// Calico matches a nil namespace: ns == 'x' then excludes the pool,
	// !has(ns) or ns != 'x' includes it.
	NamespaceLabels map[string]string
	// Namespace names the pod's namespace in errors ("" when none).
	Namespace string
	// Use is what the address is for [default Workload].
	Use v3.IPPoolAllowedUse
}

// SelectPools returns the pools an allocation may use, in the order to try
// them. Requested pools must exist, be enabled, be of the right IP version
// and allow the use; they are used in the order asked. Otherwise the
// pools of the version that are enabled, automatic, allow the use and
// whose nodeSelector and namespaceSelector select the node's and the
// namespace's labels are used, by name. When none is left the error
// (ErrNoPool) says why each pool of the version was passed over.
func SelectPools(pools []Pool, req PoolRequest) ([]Pool, error) {
	use := req.Use
	if use == "" {
		use = v3.IPPoolAllowedUseWorkload
	}
	if len(req.Requested) > 0 {
		return requestedPools(pools, req.Requested, req.Version, use)
	}
	var out []Pool
	var passed []string
	for _, p := range pools {
		if p.Version() != req.Version {
			continue
		}
		if why := p.passOver(use, req); why != "" {
			passed = append(passed, p.Name+" ("+p.CIDR.String()+") "+why)
			continue
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, noPoolError(req, use, passed)
	}
	return out, nil
}

// requestedPools resolves pools asked for by name or CIDR. A pool that
// cannot be used as asked is an error naming it, never replaced by another.
func requestedPools(pools []Pool, requested []string, version int, use v3.IPPoolAllowedUse) ([]Pool, error) {
	var out []Pool
	for _, r := range requested {
		p, ok := findPool(pools, r)
		if !ok {
			return nil, fmt.Errorf("pool %q: %w (it names no IPPool by name or CIDR)", r, ErrUnknownPool)
		}
		if p.Version() != version {
			return nil, fmt.Errorf("pool %q is IPv%d but an IPv%d pool was asked for: %w", r, p.Version(), version, ErrInvalidArgs)
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

// passOver says why automatic selection does not use the pool for req
// ("" when it does).
func (p Pool) passOver(use v3.IPPoolAllowedUse, req PoolRequest) string {
	switch {
	case p.Spec.Disabled:
		return "is disabled"
	case p.manual():
		return "has assignmentMode Manual (used only when asked for by name)"
	case !p.allows(use):
		return fmt.Sprintf("does not allow use %s", use)
	case !matches(p.Spec.NodeSelector, req.NodeLabels):
		return fmt.Sprintf("has nodeSelector %q, which does not select the node", p.Spec.NodeSelector)
	case p.Spec.NamespaceSelector != "" && !matches(p.Spec.NamespaceSelector, req.NamespaceLabels):
		return fmt.Sprintf("has namespaceSelector %q, which does not select %s", p.Spec.NamespaceSelector, namespaceDesc(req))
	}
	return ""
}

func namespaceDesc(req PoolRequest) string {
	switch {
	case req.Namespace == "":
		return "an address outside any namespace"
	case req.NamespaceLabels == nil:
		return fmt.Sprintf("namespace %q (its labels are unknown without Kubernetes access: matched as none)", req.Namespace)
	}
	return fmt.Sprintf("namespace %q", req.Namespace)
}

// noPoolError is Calico's "no configured Calico pools" with the reason
// each pool of the version was passed over.
func noPoolError(req PoolRequest, use v3.IPPoolAllowedUse, passed []string) error {
	what := "this node"
	if req.Namespace != "" {
		what = fmt.Sprintf("this node and namespace %q", req.Namespace)
	}
	if len(passed) == 0 {
		return fmt.Errorf("no configured Calico pools for %s: there is no IPv%d pool: %w", what, req.Version, ErrNoPool)
	}
	return fmt.Errorf("no configured Calico pools for %s: no enabled IPv%d pool for use %s selects it (%s): %w",
		what, req.Version, use, strings.Join(passed, "; "), ErrNoPool)
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
