package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindBGPConfiguration is the kind of BGP settings: the cluster-wide object
// named "default", and per-node overrides named "node.<nodename>".
const KindBGPConfiguration = "BGPConfiguration"

// BGPConfiguration holds the BGP settings of the cluster or of one node.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=bgpconfigurations
type BGPConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPConfigurationSpec `json:"spec,omitempty"`
}

// BGPConfigurationSpec is the content of a BGPConfiguration.
type BGPConfigurationSpec struct {
	// LogSeverityScreen is the least severe BGP log level written to stdout:
	// Trace, Debug, Info, Warning, Error or Fatal. [Default: Info]
	// +kubebuilder:default=Info
	LogSeverityScreen string `json:"logSeverityScreen,omitempty"`
	// NodeToNodeMeshEnabled turns the full node-to-node BGP mesh on or off.
	// Only on the "default" object. [Default: true]
	NodeToNodeMeshEnabled *bool `json:"nodeToNodeMeshEnabled,omitempty"`
	// ASNumber is the AS number nodes use unless their Node sets one. Only on
	// the "default" object. [Default: 64512]
	ASNumber *numorstring.ASNumber `json:"asNumber,omitempty"`
	// ServiceLoadBalancerIPs are the CIDRs of Service load-balancer addresses
	// to advertise; an ingress IP is advertised only when inside one. Only on
	// the "default" object.
	ServiceLoadBalancerIPs []ServiceLoadBalancerIPBlock `json:"serviceLoadBalancerIPs,omitempty"`
	// ServiceExternalIPs are the CIDRs of Service external IPs to advertise.
	// Only on the "default" object.
	ServiceExternalIPs []ServiceExternalIPBlock `json:"serviceExternalIPs,omitempty"`
	// ServiceClusterIPs are the CIDRs Service cluster IPs come from; they and
	// the cluster IPs in them are advertised. Only on the "default" object.
	ServiceClusterIPs []ServiceClusterIPBlock `json:"serviceClusterIPs,omitempty"`
	// Communities names BGP community values for use in prefixAdvertisements.
	Communities []Community `json:"communities,omitempty"`
	// PrefixAdvertisements attach communities to routes for given CIDRs.
	PrefixAdvertisements []PrefixAdvertisement `json:"prefixAdvertisements,omitempty"`
	// ListenPort is the TCP port BGP listens on (1-65535). [Default: 179]
	ListenPort uint16 `json:"listenPort,omitempty"`
	// NodeMeshPassword is the BGP password of the node-to-node mesh
	// peerings. Needs the mesh enabled.
	NodeMeshPassword *BGPPassword `json:"nodeMeshPassword,omitempty"`
	// NodeMeshMaxRestartTime is the graceful-restart time of the mesh
	// peerings (BIRD's default of 120s when unset). Needs the mesh enabled.
	NodeMeshMaxRestartTime *metav1.Duration `json:"nodeMeshMaxRestartTime,omitempty"`
	// BindMode says whether BGP listens on all addresses (None) or only on
	// the node's own address from Node spec.bgp (NodeIP). [Default: None]
	BindMode *BindMode `json:"bindMode,omitempty"`
	// IgnoredInterfaces are interfaces (globs allowed, e.g. "cali*") whose
	// routes are not read as device routes.
	IgnoredInterfaces []string `json:"ignoredInterfaces,omitempty"`
	// LocalWorkloadPeeringIPV4 is the virtual IPv4 address of the node that
	// local workloads peer with; a link-local address is recommended.
	LocalWorkloadPeeringIPV4 string `json:"localWorkloadPeeringIPV4,omitempty"`
	// LocalWorkloadPeeringIPV6 is the virtual IPv6 address of the node that
	// local workloads peer with; a link-local address is recommended.
	LocalWorkloadPeeringIPV6 string `json:"localWorkloadPeeringIPV6,omitempty"`
	// ProgramClusterRoutes says who programs routes to workloads on other
	// nodes from pools with vxlanMode Never: BIRD (Enabled) or Felix
	// (Disabled). VXLAN routes are always Felix's. [Default: Enabled]
	ProgramClusterRoutes *string `json:"programClusterRoutes,omitempty"`
	// ServiceLoadBalancerAggregation says whether load-balancer addresses are
	// advertised as their whole CIDR (Enabled) or as one /32 or /128 route
	// per Service (Disabled), so a failed Service's route is withdrawn.
	// [Default: Enabled]
	// +kubebuilder:default=Enabled
	ServiceLoadBalancerAggregation *ServiceLoadBalancerAggregation `json:"serviceLoadBalancerAggregation,omitempty"`
	// IPv4NormalRoutePriority is the metric Felix gives IPv4 workload routes;
	// it must match FelixConfiguration. BIRD uses it to tell elevated routes
	// (during live migration) apart. [Default: 1024]
	IPv4NormalRoutePriority *int `json:"ipv4NormalRoutePriority,omitempty"`
	// IPv6NormalRoutePriority is the IPv6 counterpart of
	// IPv4NormalRoutePriority. [Default: 1024]
	IPv6NormalRoutePriority *int `json:"ipv6NormalRoutePriority,omitempty"`
}

// ServiceLoadBalancerIPBlock is one CIDR of Service load-balancer addresses.
type ServiceLoadBalancerIPBlock struct {
	// CIDR of the block.
	CIDR string `json:"cidr,omitempty"`
}

// ServiceExternalIPBlock is one CIDR of Service external IPs.
type ServiceExternalIPBlock struct {
	// CIDR of the block.
	CIDR string `json:"cidr,omitempty"`
}

// ServiceClusterIPBlock is one CIDR of Service cluster IPs.
type ServiceClusterIPBlock struct {
	// CIDR of the block.
	CIDR string `json:"cidr,omitempty"`
}

// Community names a BGP community value.
type Community struct {
	// Name by which prefixAdvertisements refer to the value.
	Name string `json:"name,omitempty"`
	// Value is a standard community aa:nn (16-bit numbers) or a large
	// community aa:nn:mm (32-bit numbers); aa is an AS number.
	Value string `json:"value,omitempty"`
}

// PrefixAdvertisement attaches communities to the routes of a CIDR.
type PrefixAdvertisement struct {
	// CIDR whose routes get the communities.
	CIDR string `json:"cidr,omitempty"`
	// Communities are names from spec.communities or literal values aa:nn
	// or aa:nn:mm.
	Communities []string `json:"communities,omitempty"`
}

// BindMode says which addresses BGP listens on.
// +kubebuilder:validation:Enum=None;NodeIP
type BindMode string

// Bind modes.
const (
	BindModeNone   BindMode = "None"
	BindModeNodeIP BindMode = "NodeIP"
)

// ServiceLoadBalancerAggregation is Enabled or Disabled.
// +kubebuilder:validation:Enum=Enabled;Disabled
type ServiceLoadBalancerAggregation string

// Values of ServiceLoadBalancerAggregation.
const (
	ServiceLoadBalancerAggregationEnabled  ServiceLoadBalancerAggregation = "Enabled"
	ServiceLoadBalancerAggregationDisabled ServiceLoadBalancerAggregation = "Disabled"
)

// Values of BGPConfigurationSpec.ProgramClusterRoutes.
const (
	ProgramClusterRoutesEnabled  = "Enabled"
	ProgramClusterRoutesDisabled = "Disabled"
)

// Defaults Calico applies to the "default" BGPConfiguration.
const (
	DefaultBGPASNumber   numorstring.ASNumber = 64512
	DefaultBGPListenPort uint16               = 179
)

// BGPConfigurationList is a list of BGPConfiguration.
// +kubebuilder:object:root=true
type BGPConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPConfiguration `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindBGPConfiguration, Plural: "bgpconfigurations",
		New:     func() Resource { return &BGPConfiguration{TypeMeta: typeMeta(KindBGPConfiguration)} },
		NewList: func() runtimeObject { return &BGPConfigurationList{TypeMeta: typeMeta(KindBGPConfiguration + "List")} },
	})
}

// Default fills Calico's defaults. Every object gets the defaults of
// Calico's CRD (logSeverityScreen Info, serviceLoadBalancerAggregation
// Enabled). The "default" object also gets the cluster-wide values Calico
// assumes when they are unset (AS 64512, node-to-node mesh on, listen port
// 179); per-node objects do not, since an unset field there means "inherit
// from default".
func (c *BGPConfiguration) Default() {
	s := &c.Spec
	if s.LogSeverityScreen == "" {
		s.LogSeverityScreen = "Info"
	}
	if s.ServiceLoadBalancerAggregation == nil {
		a := ServiceLoadBalancerAggregationEnabled
		s.ServiceLoadBalancerAggregation = &a
	}
	if c.Name != "default" {
		return
	}
	if s.ASNumber == nil {
		as := DefaultBGPASNumber
		s.ASNumber = &as
	}
	if s.NodeToNodeMeshEnabled == nil {
		on := true
		s.NodeToNodeMeshEnabled = &on
	}
	if s.ListenPort == 0 {
		s.ListenPort = DefaultBGPListenPort
	}
}

// Validate implements Resource; the rules are in bgpconfiguration_validate.go.
func (c *BGPConfiguration) Validate() ErrorList {
	errs := validateMeta(&c.ObjectMeta, false)
	errs.Extend(c.Spec.validate(Path("spec"), c.Name == "default"))
	return errs
}
