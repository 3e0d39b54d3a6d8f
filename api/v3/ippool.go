package v3

import (
	"net"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindIPPool is the kind of a pool of IP addresses that Calico IPAM assigns
// to workloads, tunnels or load balancers.
const KindIPPool = "IPPool"

// IPPool is a range of IP addresses from which endpoint IPs are assigned,
// with the encapsulation and NAT settings for traffic to and from it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=ippools
// +kubebuilder:subresource:status
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec IPPoolSpec `json:"spec,omitempty"`
	// Status is written by Tabby: whether the pool may be allocated from.
	Status *IPPoolStatus `json:"status,omitempty"`
}

// IPPoolSpec is the content of an IPPool.
type IPPoolSpec struct {
	// CIDR is the pool's range, e.g. 192.168.0.0/16. Host bits must be zero.
	CIDR string `json:"cidr"`
	// VXLANMode says when traffic to this pool is VXLAN-encapsulated:
	// Never, Always or CrossSubnet. [Default: Never]
	VXLANMode VXLANMode `json:"vxlanMode,omitempty"`
	// IPIPMode says when traffic to this pool is IP-in-IP-encapsulated:
	// Never, Always or CrossSubnet. IPv4 pools only. [Default: Never]
	IPIPMode IPIPMode `json:"ipipMode,omitempty"`
	// NATOutgoing masquerades traffic from this pool to destinations outside
	// all IP pools.
	NATOutgoing bool `json:"natOutgoing,omitempty"`
	// Disabled stops IPAM assigning new addresses from this pool.
	Disabled bool `json:"disabled,omitempty"`
	// DisableBGPExport stops routes for this pool's CIDR being advertised
	// over BGP. [Default: false]
	DisableBGPExport bool `json:"disableBGPExport,omitempty"`
	// BlockSize is the prefix length of the blocks IPAM carves from the pool
	// and affines to nodes: 20-32 for IPv4, 116-128 for IPv6.
	// [Default: 26 for IPv4, 122 for IPv6]
	BlockSize int `json:"blockSize,omitempty"`
	// NodeSelector selects the nodes that may be assigned addresses from
	// this pool. [Default: all()]
	NodeSelector string `json:"nodeSelector,omitempty"`
	// NamespaceSelector selects the namespaces whose pods may be assigned
	// addresses from this pool; nodeSelector must match as well.
	NamespaceSelector string `json:"namespaceSelector,omitempty"`
	// AllowedUses says what the pool's addresses are for: Workload, Tunnel
	// and/or LoadBalancer (LoadBalancer cannot be combined with the others).
	// [Default: [Workload, Tunnel]]
	// +listType=set
	AllowedUses []IPPoolAllowedUse `json:"allowedUses,omitempty"`
	// AssignmentMode is Automatic (addresses are handed out to any
	// workload) or Manual (only when explicitly requested).
	// [Default: Automatic]
	// +kubebuilder:default=Automatic
	AssignmentMode *AssignmentMode `json:"assignmentMode,omitempty"`
}

// IPPoolStatus reports the pool's state as seen by Tabby.
type IPPoolStatus struct {
	// Conditions hold the pool's state; type Allocatable says whether IPAM
	// may assign addresses from it.
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPPool condition type and reasons.
const (
	IPPoolConditionAllocatable = "Allocatable"

	IPPoolReasonCIDROverlap = "CIDROverlap"
	IPPoolReasonTerminating = "Terminating"
	IPPoolReasonDisabled    = "PoolDisabled"
	IPPoolReasonOK          = "OK"
)

// IPPoolAllowedUse is one use of a pool's addresses.
// +kubebuilder:validation:Enum=Workload;Tunnel;LoadBalancer
type IPPoolAllowedUse string

// Allowed uses of an IP pool.
const (
	IPPoolAllowedUseWorkload     IPPoolAllowedUse = "Workload"
	IPPoolAllowedUseTunnel       IPPoolAllowedUse = "Tunnel"
	IPPoolAllowedUseLoadBalancer IPPoolAllowedUse = "LoadBalancer"
)

// VXLANMode says when VXLAN encapsulation is used.
// +kubebuilder:validation:Enum=Never;Always;CrossSubnet
type VXLANMode string

// VXLAN modes.
const (
	VXLANModeNever       VXLANMode = "Never"
	VXLANModeAlways      VXLANMode = "Always"
	VXLANModeCrossSubnet VXLANMode = "CrossSubnet"
)

// IPIPMode says when IP-in-IP encapsulation is used.
// +kubebuilder:validation:Enum=Never;Always;CrossSubnet
type IPIPMode string

// IP-in-IP modes.
const (
	IPIPModeNever       IPIPMode = "Never"
	IPIPModeAlways      IPIPMode = "Always"
	IPIPModeCrossSubnet IPIPMode = "CrossSubnet"
)

// AssignmentMode says whether a pool's addresses are handed out
// automatically or only on explicit request.
// +kubebuilder:validation:Enum=Automatic;Manual
type AssignmentMode string

// Assignment modes. (Calico names these Automatic and Manual.)
const (
	AssignmentModeAutomatic AssignmentMode = "Automatic"
	AssignmentModeManual    AssignmentMode = "Manual"
)

// Default block sizes (prefix lengths) of IPv4 and IPv6 pools.
const (
	DefaultIPv4BlockSize = 26
	DefaultIPv6BlockSize = 122
)

// IPPoolList is a list of IPPool.
// +kubebuilder:object:root=true
type IPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPPool `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindIPPool, Plural: "ippools",
		New:     func() Resource { return &IPPool{TypeMeta: typeMeta(KindIPPool)} },
		NewList: func() runtimeObject { return &IPPoolList{TypeMeta: typeMeta(KindIPPool + "List")} },
	})
}

// Default fills in Calico's defaults (libcalico-go clientv3 ippool.go):
// block size 26 or 122 by IP version, Never for both encapsulations,
// nodeSelector all(), allowed uses [Workload, Tunnel] and assignment mode
// Automatic. A strictly masked CIDR is rewritten in canonical form (e.g.
// fd00:0::/64 becomes fd00::/64); a CIDR with host bits set is left for
// Validate to reject.
func (p *IPPool) Default() {
	s := &p.Spec
	if ip, n, err := net.ParseCIDR(s.CIDR); err == nil {
		if ip.Equal(n.IP) {
			s.CIDR = n.String()
		}
		if s.BlockSize == 0 {
			if n.IP.To4() != nil {
				s.BlockSize = DefaultIPv4BlockSize
			} else {
				s.BlockSize = DefaultIPv6BlockSize
			}
		}
	}
	if s.IPIPMode == "" {
		s.IPIPMode = IPIPModeNever
	}
	if s.VXLANMode == "" {
		s.VXLANMode = VXLANModeNever
	}
	if s.NodeSelector == "" {
		s.NodeSelector = "all()"
	}
	if len(s.AllowedUses) == 0 {
		s.AllowedUses = []IPPoolAllowedUse{IPPoolAllowedUseWorkload, IPPoolAllowedUseTunnel}
	}
	if s.AssignmentMode == nil {
		m := AssignmentModeAutomatic
		s.AssignmentMode = &m
	}
}

// Validate implements Resource; the rules are in ippool_validate.go.
func (p *IPPool) Validate() ErrorList {
	errs := validateMeta(&p.ObjectMeta, false)
	errs.Extend(p.Spec.validate(Path("spec")))
	if p.Status != nil {
		errs.Extend(netValidateConditions(Path("status").Child("conditions"), p.Status.Conditions))
	}
	return errs
}

// IPVersion returns 4 or 6 for the pool's CIDR, or 0 when it does not parse.
func (s *IPPoolSpec) IPVersion() int {
	_, n, err := net.ParseCIDR(s.CIDR)
	if err != nil {
		return 0
	}
	if n.IP.To4() != nil {
		return 4
	}
	return 6
}
