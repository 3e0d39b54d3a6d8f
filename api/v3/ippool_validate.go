package v3

import (
	"net"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Link-local ranges no pool may overlap (Calico rejects them: the addresses
// are used on every host's links and by cloud metadata services).
var (
	netIPv4LinkLocal = &net.IPNet{IP: net.IPv4(169, 254, 0, 0).To4(), Mask: net.CIDRMask(16, 32)}
	netIPv6LinkLocal = &net.IPNet{IP: net.ParseIP("fe80::"), Mask: net.CIDRMask(10, 128)}
)

// validate checks an IPPoolSpec as Calico's clientv3 and v3 validator do,
// after Default has run.
func (s *IPPoolSpec) validate(p Path) ErrorList {
	var errs ErrorList

	// The CIDR: present, CIDR notation, strictly masked, not link-local.
	version := 0
	var pool *net.IPNet
	cidrPath := p.Child("cidr")
	switch ip, n, err := net.ParseCIDR(s.CIDR); {
	case s.CIDR == "":
		errs.Add(cidrPath, "is required: give the pool's range, e.g. 192.168.0.0/16")
	case err != nil:
		errs.Addf(cidrPath, "%q is not a valid CIDR (use address/prefix, e.g. 192.168.0.0/16)", s.CIDR)
	case !ip.Equal(n.IP):
		errs.Addf(cidrPath, "%q is not strictly masked: host bits are set (did you mean %s?)", s.CIDR, n.String())
	default:
		pool = n
		version = 6
		if n.IP.To4() != nil {
			version = 4
		}
		if version == 4 && netOverlap(n, netIPv4LinkLocal) {
			errs.Addf(cidrPath, "%s overlaps the IPv4 link-local range 169.254.0.0/16", s.CIDR)
		}
		if version == 6 && netOverlap(n, netIPv6LinkLocal) {
			errs.Addf(cidrPath, "%s overlaps the IPv6 link-local range fe80::/10", s.CIDR)
		}
	}

	// Block size: bounds per IP version, and the pool must hold at least one
	// block unless it is disabled.
	if pool != nil {
		bs := p.Child("blockSize")
		switch {
		case version == 4 && (s.BlockSize < 20 || s.BlockSize > 32):
			errs.Addf(bs, "%d is outside 20-32 for an IPv4 pool", s.BlockSize)
		case version == 6 && (s.BlockSize < 116 || s.BlockSize > 128):
			errs.Addf(bs, "%d is outside 116-128 for an IPv6 pool", s.BlockSize)
		default:
			if ones, _ := pool.Mask.Size(); !s.Disabled && ones > s.BlockSize {
				errs.Addf(cidrPath, "pool %s (/%d) is smaller than one /%d block: use a pool of /%d or larger, or a smaller blockSize",
					s.CIDR, ones, s.BlockSize, s.BlockSize)
			}
		}
	}

	// Encapsulation modes.
	oneOf(p.Child("ipipMode"), string(s.IPIPMode), &errs, string(IPIPModeNever), string(IPIPModeAlways), string(IPIPModeCrossSubnet))
	oneOf(p.Child("vxlanMode"), string(s.VXLANMode), &errs, string(VXLANModeNever), string(VXLANModeAlways), string(VXLANModeCrossSubnet))
	ipip := s.IPIPMode == IPIPModeAlways || s.IPIPMode == IPIPModeCrossSubnet
	vxlan := s.VXLANMode == VXLANModeAlways || s.VXLANMode == VXLANModeCrossSubnet
	if ipip && vxlan {
		errs.Addf(p.Child("vxlanMode"), "cannot enable both VXLAN (%s) and IPIP (%s) on one pool: set one of them to Never", s.VXLANMode, s.IPIPMode)
	}
	if version == 6 && ipip {
		errs.Addf(p.Child("ipipMode"), "%s is not supported on an IPv6 pool: IPIP carries IPv4 only (use Never, or vxlanMode for IPv6)", s.IPIPMode)
	}

	errs.Extend(validateSelector(p.Child("nodeSelector"), s.NodeSelector))
	errs.Extend(validateSelector(p.Child("namespaceSelector"), s.NamespaceSelector))
	// Calico's CRD rules: global() selects across namespaces of a
	// policy's rule only; a tunnel address is the node's, never a
	// namespace's.
	if strings.Contains(s.NodeSelector, "global(") {
		errs.Add(p.Child("nodeSelector"), "global() selector is not valid for IPPool nodeSelector")
	}
	if strings.Contains(s.NamespaceSelector, "global(") {
		errs.Add(p.Child("namespaceSelector"), "global() selector is not valid for IPPool namespaceSelector")
	}
	if s.NamespaceSelector != "" && slices.Contains(s.AllowedUses, IPPoolAllowedUseTunnel) {
		errs.Add(p.Child("namespaceSelector"), "IP Pool with AllowedUse Tunnel cannot have namespaceSelector")
	}

	// Allowed uses: known values, no repeats, LoadBalancer on its own.
	uses := p.Child("allowedUses")
	loadBalancer := false
	for i, u := range s.AllowedUses {
		if !oneOf(uses.Index(i), string(u), &errs, string(IPPoolAllowedUseWorkload), string(IPPoolAllowedUseTunnel), string(IPPoolAllowedUseLoadBalancer)) {
			continue
		}
		if u == "" {
			errs.Add(uses.Index(i), "is empty: use Workload, Tunnel or LoadBalancer")
		}
		if u == IPPoolAllowedUseLoadBalancer {
			loadBalancer = true
		}
	}
	netCheckUnique(uses, s.AllowedUses, &errs)
	if loadBalancer {
		var others []string
		for _, u := range s.AllowedUses {
			if u == IPPoolAllowedUseWorkload || u == IPPoolAllowedUseTunnel {
				others = append(others, string(u))
			}
		}
		if len(others) > 0 {
			errs.Addf(uses, "LoadBalancer cannot be combined with %s: a LoadBalancer pool serves only Service load-balancer addresses", strings.Join(others, " or "))
		}
		if ipip || vxlan {
			errs.Add(uses, "a LoadBalancer pool cannot have IPIP or VXLAN enabled: set ipipMode and vxlanMode to Never")
		}
		if s.DisableBGPExport {
			errs.Add(p.Child("disableBGPExport"), "must be false for a LoadBalancer pool: its addresses are reached by advertising them over BGP")
		}
		if s.NodeSelector != "all()" {
			errs.Addf(p.Child("nodeSelector"), "must be all() for a LoadBalancer pool, got %q", s.NodeSelector)
		}
	}

	if s.AssignmentMode != nil {
		if *s.AssignmentMode == "" {
			errs.Add(p.Child("assignmentMode"), "is empty: use Automatic or Manual")
		}
		oneOf(p.Child("assignmentMode"), string(*s.AssignmentMode), &errs, string(AssignmentModeAutomatic), string(AssignmentModeManual))
	}
	return errs
}

// netValidateConditions checks status conditions have a type and a status
// of True, False or Unknown.
func netValidateConditions(p Path, conds []metav1.Condition) ErrorList {
	var errs ErrorList
	for i, c := range conds {
		cp := p.Index(i)
		if c.Type == "" {
			errs.Add(cp.Child("type"), "is required")
		}
		if c.Status == "" {
			errs.Add(cp.Child("status"), "is required: use True, False or Unknown")
		}
		oneOf(cp.Child("status"), string(c.Status), &errs, string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown))
	}
	return errs
}
