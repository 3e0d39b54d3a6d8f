package v3

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindFelixConfiguration is the kind of the objects that configure Felix,
// the per-node agent. The object named "default" holds cluster-wide
// settings; an object named "node.<nodename>" overrides them for one node.
const KindFelixConfiguration = "FelixConfiguration"

// FelixConfigurationNamePrefix starts the name of a per-node
// FelixConfiguration: "node." followed by the node's name.
const FelixConfigurationNamePrefix = "node."

// FelixConfiguration holds Felix's settings. Unset fields take Felix's
// built-in defaults (see FelixDefaults), so a stored object usually sets
// only what the operator changed.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=felixconfigurations
type FelixConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec FelixConfigurationSpec `json:"spec,omitempty"`
}

// FelixConfigurationList is a list of FelixConfiguration.
// +kubebuilder:object:root=true
type FelixConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []FelixConfiguration `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindFelixConfiguration, Plural: "felixconfigurations",
		New: func() Resource { return &FelixConfiguration{TypeMeta: typeMeta(KindFelixConfiguration)} },
		NewList: func() runtimeObject {
			return &FelixConfigurationList{TypeMeta: typeMeta(KindFelixConfiguration + "List")}
		},
	})
}

// IptablesBackend selects the iptables implementation Felix drives.
type IptablesBackend string

// Values of IptablesBackend.
const (
	IptablesBackendLegacy   IptablesBackend = "Legacy"
	IptablesBackendNFTables IptablesBackend = "NFT"
	IptablesBackendAuto     IptablesBackend = "Auto"
)

// NFTablesMode turns Felix's nftables dataplane on or off.
// +kubebuilder:validation:Enum=Disabled;Enabled;Auto
type NFTablesMode string

// Values of NFTablesMode.
const (
	NFTablesModeEnabled  NFTablesMode = "Enabled"
	NFTablesModeDisabled NFTablesMode = "Disabled"
	NFTablesModeAuto     NFTablesMode = "Auto"
)

// AWSSrcDstCheckOption says what Felix does to the EC2 source/destination
// check of the instance it runs on.
// +kubebuilder:validation:Enum=DoNothing;Enable;Disable
type AWSSrcDstCheckOption string

// Values of AWSSrcDstCheckOption.
const (
	AWSSrcDstCheckOptionDoNothing AWSSrcDstCheckOption = "DoNothing"
	AWSSrcDstCheckOptionEnable    AWSSrcDstCheckOption = "Enable"
	AWSSrcDstCheckOptionDisable   AWSSrcDstCheckOption = "Disable"
)

// FloatingIPType turns programming of non-OpenStack floating IPs on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type FloatingIPType string

// Values of FloatingIPType.
const (
	FloatingIPsEnabled  FloatingIPType = "Enabled"
	FloatingIPsDisabled FloatingIPType = "Disabled"
)

// BPFHostNetworkedNATType turns NAT of host-networked traffic without the
// connect-time load balancer on or off (BPF mode).
// +kubebuilder:validation:Enum=Enabled;Disabled
type BPFHostNetworkedNATType string

// Values of BPFHostNetworkedNATType.
const (
	BPFHostNetworkedNATEnabled  BPFHostNetworkedNATType = "Enabled"
	BPFHostNetworkedNATDisabled BPFHostNetworkedNATType = "Disabled"
)

// BPFConnectTimeLBType selects the connect-time load balancer mode (BPF
// mode).
// +kubebuilder:validation:Enum=TCP;Enabled;Disabled
type BPFConnectTimeLBType string

// Values of BPFConnectTimeLBType.
const (
	BPFConnectTimeLBTCP      BPFConnectTimeLBType = "TCP"
	BPFConnectTimeLBEnabled  BPFConnectTimeLBType = "Enabled"
	BPFConnectTimeLBDisabled BPFConnectTimeLBType = "Disabled"
)

// BPFConntrackMode selects how expired BPF conntrack entries are removed.
// +kubebuilder:validation:Enum=Auto;Userspace;BPFProgram
type BPFConntrackMode string

// Values of BPFConntrackMode.
const (
	BPFConntrackModeAuto       BPFConntrackMode = "Auto"
	BPFConntrackModeUserspace  BPFConntrackMode = "Userspace"
	BPFConntrackModeBPFProgram BPFConntrackMode = "BPFProgram"
)

// BPFAttachOption selects how BPF programs are attached to interfaces.
// +kubebuilder:validation:Enum=TC;TCX
type BPFAttachOption string

// Values of BPFAttachOption.
const (
	BPFAttachOptionTC  BPFAttachOption = "TC"
	BPFAttachOptionTCX BPFAttachOption = "TCX"
)

// BPFJITHardeningType selects whether Felix may relax the kernel's BPF JIT
// hardening sysctl.
// +kubebuilder:validation:Enum=Auto;Strict
type BPFJITHardeningType string

// Values of BPFJITHardeningType.
const (
	BPFJITHardeningAuto   BPFJITHardeningType = "Auto"
	BPFJITHardeningStrict BPFJITHardeningType = "Strict"
)

// WindowsManageFirewallRulesMode turns management of Windows Firewall rules
// on or off.
// +kubebuilder:validation:Enum=Enabled;Disabled
type WindowsManageFirewallRulesMode string

// Values of WindowsManageFirewallRulesMode.
const (
	WindowsManageFirewallRulesEnabled  WindowsManageFirewallRulesMode = "Enabled"
	WindowsManageFirewallRulesDisabled WindowsManageFirewallRulesMode = "Disabled"
)

// FlowLogsPolicyEvaluationModeType selects whether Felix keeps re-evaluating
// the policy trace of active flows.
// +kubebuilder:validation:Enum=None;Continuous
type FlowLogsPolicyEvaluationModeType string

// Values of FlowLogsPolicyEvaluationModeType.
const (
	FlowLogsPolicyEvaluationModeNone       FlowLogsPolicyEvaluationModeType = "None"
	FlowLogsPolicyEvaluationModeContinuous FlowLogsPolicyEvaluationModeType = "Continuous"
)

// NATOutgoingExclusionsType selects which destinations are exempt from
// outgoing NAT for pools with natOutgoing.
// +kubebuilder:validation:Enum=IPPoolsOnly;IPPoolsAndHostIPs
type NATOutgoingExclusionsType string

// Values of NATOutgoingExclusionsType.
const (
	NATOutgoingExclusionsIPPoolsOnly       NATOutgoingExclusionsType = "IPPoolsOnly"
	NATOutgoingExclusionsIPPoolsAndHostIPs NATOutgoingExclusionsType = "IPPoolsAndHostIPs"
)

// FelixConfigurationSpec holds every Felix setting that can be stored in
// the datastore. Field names, JSON names and types follow Calico's
// projectcalico.org/v3 FelixConfigurationSpec. Durations are written as Go
// durations ("90s", "1m30s"); "[Default: x]" names Felix's built-in value.
type FelixConfigurationSpec struct {
	// NodeSelector limits this FelixConfiguration to the nodes whose
	// labels match. Only for FelixConfigurations not named "default" nor
	// "node.<node>" (those apply to all nodes and to one node).
	// +kubebuilder:validation:MaxLength=1024
	NodeSelector *string `json:"nodeSelector,omitempty"`
	// UseInternalDataplaneDriver, if true, makes Felix program the dataplane
	// itself; if false it runs the external driver named by DataplaneDriver.
	// [Default: true]
	UseInternalDataplaneDriver *bool `json:"useInternalDataplaneDriver,omitempty"`
	// DataplaneDriver is the file name of the external dataplane driver, used
	// only when UseInternalDataplaneDriver is false.
	DataplaneDriver string `json:"dataplaneDriver,omitempty"`
	// DataplaneWatchdogTimeout is the liveness/readiness timeout of the
	// internal dataplane driver. Deprecated: use HealthTimeoutOverrides.
	// [Default: 90s]
	DataplaneWatchdogTimeout *metav1.Duration `json:"dataplaneWatchdogTimeout,omitempty"`
	// IPv6Support enables IPv6 support in the dataplane. [Default: true]
	IPv6Support *bool `json:"ipv6Support,omitempty"`
	// RouteRefreshInterval is how often Felix re-checks its routes for
	// drift; 0 disables the check. [Default: 90s]
	RouteRefreshInterval *metav1.Duration `json:"routeRefreshInterval,omitempty"`
	// InterfaceRefreshInterval is how often Felix rescans local interfaces;
	// 0 disables the rescan. [Default: 90s]
	InterfaceRefreshInterval *metav1.Duration `json:"interfaceRefreshInterval,omitempty"`
	// IptablesRefreshInterval is how often Felix re-reads its iptables state
	// to repair changes made by others; 0 disables the refresh. [Default: 180s]
	IptablesRefreshInterval *metav1.Duration `json:"iptablesRefreshInterval,omitempty"`
	// IptablesPostWriteCheckInterval is how long after a write Felix reads the
	// tables back to check nobody clobbered them. [Default: 5s]
	IptablesPostWriteCheckInterval *metav1.Duration `json:"iptablesPostWriteCheckInterval,omitempty"`
	// IptablesLockFilePath is the iptables lock file. [Default: /run/xtables.lock]
	IptablesLockFilePath string `json:"iptablesLockFilePath,omitempty"`
	// IptablesLockTimeout is how long Felix itself waits for the iptables
	// lock; 0 leaves locking to iptables. Deprecated. [Default: 0s]
	IptablesLockTimeout *metav1.Duration `json:"iptablesLockTimeout,omitempty"`
	// IptablesLockProbeInterval is the wait between attempts to take the
	// iptables lock when IptablesLockTimeout is set. [Default: 50ms]
	IptablesLockProbeInterval *metav1.Duration `json:"iptablesLockProbeInterval,omitempty"`
	// FeatureDetectOverride forces detected dataplane features on or off, as
	// a comma-separated list such as "SNATFullyRandom=true,RestoreSupportsLock=".
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9-_]+=(true|false|),)*([a-zA-Z0-9-_]+=(true|false|))?$`
	FeatureDetectOverride string `json:"featureDetectOverride,omitempty"`
	// FeatureGates enables or disables tech-preview features, as a
	// comma-separated list of name=value.
	// +kubebuilder:validation:Pattern=`^([a-zA-Z0-9-_]+=([^=]+),)*([a-zA-Z0-9-_]+=([^=]+))?$`
	FeatureGates string `json:"featureGates,omitempty"`
	// IpsetsRefreshInterval is how often Felix re-checks all IP sets; 0
	// disables the check. [Default: 90s]
	IpsetsRefreshInterval *metav1.Duration `json:"ipsetsRefreshInterval,omitempty"`
	// MaxIpsetSize is the largest number of members of one IP set (not used
	// by the nftables backend). [Default: 1048576]
	MaxIpsetSize *int `json:"maxIpsetSize,omitempty"`
	// IptablesBackend selects the iptables backend: Legacy, NFT or Auto.
	// [Default: Auto]
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(?i)(Auto|Legacy|NFT)?$`
	IptablesBackend *IptablesBackend `json:"iptablesBackend,omitempty"`
	// XDPRefreshInterval is how often Felix re-checks its XDP state; 0
	// disables the check. [Default: 90s]
	XDPRefreshInterval *metav1.Duration `json:"xdpRefreshInterval,omitempty"`
	// NetlinkTimeout bounds each netlink request to the kernel. [Default: 10s]
	NetlinkTimeout *metav1.Duration `json:"netlinkTimeout,omitempty"`
	// MetadataAddr is the IP or host name of the OpenStack metadata server,
	// or "none" for no metadata NAT rule. [Default: 127.0.0.1]
	MetadataAddr string `json:"metadataAddr,omitempty"`
	// MetadataPort is the port of the metadata server. [Default: 8775]
	MetadataPort *int `json:"metadataPort,omitempty"`
	// OpenstackRegion is the OpenStack region this Felix belongs to.
	OpenstackRegion string `json:"openstackRegion,omitempty"`
	// InterfacePrefix is the name prefix (or comma-separated prefixes) of
	// workload interfaces. [Default: cali]
	InterfacePrefix string `json:"interfacePrefix,omitempty"`
	// InterfaceExclude is a comma-separated list of interface names, or
	// /regexps/, that Felix ignores when resolving host endpoints.
	// [Default: kube-ipvs0]
	InterfaceExclude string `json:"interfaceExclude,omitempty"`
	// ChainInsertMode says whether Felix inserts its hooks at the top of the
	// kernel's chains or appends them. [Default: Insert]
	// +kubebuilder:validation:Pattern=`^(?i)(Insert|Append)?$`
	ChainInsertMode string `json:"chainInsertMode,omitempty"`
	// DefaultEndpointToHostAction is the verdict for workload-to-host traffic
	// after the endpoint's egress policy: Drop, Accept or Return.
	// [Default: Drop]
	// +kubebuilder:validation:Pattern=`^(?i)(Drop|Accept|Return)?$`
	DefaultEndpointToHostAction string `json:"defaultEndpointToHostAction,omitempty"`
	// IptablesFilterAllowAction is the iptables action for allowed traffic
	// in the filter table: Accept or Return. [Default: Accept]
	// +kubebuilder:validation:Pattern=`^(?i)(Accept|Return)?$`
	IptablesFilterAllowAction string `json:"iptablesFilterAllowAction,omitempty"`
	// IptablesMangleAllowAction is the iptables action for allowed traffic
	// in the mangle table: Accept or Return. [Default: Accept]
	// +kubebuilder:validation:Pattern=`^(?i)(Accept|Return)?$`
	IptablesMangleAllowAction string `json:"iptablesMangleAllowAction,omitempty"`
	// IptablesFilterDenyAction is the iptables action for denied traffic:
	// Drop or Reject. [Default: Drop]
	// +kubebuilder:validation:Pattern=`^(?i)(Drop|Reject)?$`
	IptablesFilterDenyAction string `json:"iptablesFilterDenyAction,omitempty"`
	// LogPrefix is the prefix of packet LOG rules. [Default: calico-packet]
	LogPrefix string `json:"logPrefix,omitempty"`
	// LogActionRateLimit limits how often a Log action logs: "N/unit" with
	// N 1-9999 and unit second, minute, hour or day (e.g. "10/second").
	// Unset means no limit.
	// +kubebuilder:validation:Pattern=`^[1-9]\d{0,3}/(?:second|minute|hour|day)$`
	LogActionRateLimit *string `json:"logActionRateLimit,omitempty"`
	// LogActionRateLimitBurst is the burst allowed by LogActionRateLimit
	// (0-9999).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=9999
	LogActionRateLimitBurst *int `json:"logActionRateLimitBurst,omitempty"`
	// LogFilePath is Felix's log file, or "none". [Default: /var/log/calico/felix.log]
	LogFilePath string `json:"logFilePath,omitempty"`
	// LogSeverityFile is the lowest severity logged to the file. [Default: Info]
	// +kubebuilder:validation:Pattern=`^(?i)(Trace|Debug|Info|Warning|Error|Fatal)?$`
	LogSeverityFile string `json:"logSeverityFile,omitempty"`
	// LogSeverityScreen is the lowest severity logged to stdout. [Default: Info]
	// +kubebuilder:validation:Pattern=`^(?i)(Trace|Debug|Info|Warning|Error|Fatal)?$`
	LogSeverityScreen string `json:"logSeverityScreen,omitempty"`
	// LogSeveritySys is the lowest severity logged to syslog. [Default: Info]
	// +kubebuilder:validation:Pattern=`^(?i)(Trace|Debug|Info|Warning|Error|Fatal)?$`
	LogSeveritySys string `json:"logSeveritySys,omitempty"`
	// LogDebugFilenameRegex limits Debug logs to source files whose names
	// match this regular expression.
	LogDebugFilenameRegex string `json:"logDebugFilenameRegex,omitempty"`
	// IPIPEnabled forces the IPIP tunnel device on or off; unset lets Felix
	// decide from the IP pools.
	IPIPEnabled *bool `json:"ipipEnabled,omitempty"`
	// IPIPMTU is the MTU of the IPIP device; 0 auto-detects. [Default: 0]
	IPIPMTU *int `json:"ipipMTU,omitempty"`
	// VXLANEnabled forces the IPv4 VXLAN device on or off; unset lets Felix
	// decide from the IP pools.
	VXLANEnabled *bool `json:"vxlanEnabled,omitempty"`
	// VXLANMTU is the MTU of the IPv4 VXLAN device; 0 auto-detects. [Default: 0]
	VXLANMTU *int `json:"vxlanMTU,omitempty"`
	// VXLANMTUV6 is the MTU of the IPv6 VXLAN device; 0 auto-detects. [Default: 0]
	VXLANMTUV6 *int `json:"vxlanMTUV6,omitempty"`
	// VXLANPort is the UDP port of VXLAN traffic. [Default: 4789]
	VXLANPort *int `json:"vxlanPort,omitempty"`
	// VXLANVNI is the VXLAN network identifier. [Default: 4096]
	VXLANVNI *int `json:"vxlanVNI,omitempty"`
	// AllowVXLANPacketsFromWorkloads stops Felix dropping VXLAN packets sent
	// by workloads. [Default: false]
	AllowVXLANPacketsFromWorkloads *bool `json:"allowVXLANPacketsFromWorkloads,omitempty"`
	// AllowIPIPPacketsFromWorkloads stops Felix dropping IPIP packets sent by
	// workloads. [Default: false]
	AllowIPIPPacketsFromWorkloads *bool `json:"allowIPIPPacketsFromWorkloads,omitempty"`
	// ReportingInterval is how often Felix reports its status to the
	// datastore; 0 disables reports. [Default: 30s]
	ReportingInterval *metav1.Duration `json:"reportingInterval,omitempty"`
	// ReportingTTL is the time-to-live of Felix's status reports. [Default: 90s]
	ReportingTTL *metav1.Duration `json:"reportingTTL,omitempty"`
	// EndpointReportingEnabled makes Felix report endpoint status to the
	// datastore (OpenStack only). [Default: false]
	EndpointReportingEnabled *bool `json:"endpointReportingEnabled,omitempty"`
	// EndpointReportingDelay is the delay before endpoint status is reported
	// (OpenStack only). [Default: 1s]
	EndpointReportingDelay *metav1.Duration `json:"endpointReportingDelay,omitempty"`
	// EndpointStatusPathPrefix is the directory Felix writes endpoint status
	// files to; empty disables them. [Default: /var/run/calico]
	EndpointStatusPathPrefix string `json:"endpointStatusPathPrefix,omitempty"`
	// IptablesMarkMask is the set of packet mark bits Felix may use with
	// iptables: a 32-bit mask with at least 8 bits set. [Default: 0xffff0000]
	// A mask is an unsigned 32-bit value, above int32's range.
	// +kubebuilder:validation:Format=int64
	IptablesMarkMask *uint32 `json:"iptablesMarkMask,omitempty"`
	// DisableConntrackInvalidCheck turns off dropping of packets conntrack
	// marks invalid. [Default: false]
	DisableConntrackInvalidCheck *bool `json:"disableConntrackInvalidCheck,omitempty"`
	// HealthEnabled turns on Felix's health (liveness/readiness) server.
	// [Default: false]
	HealthEnabled *bool `json:"healthEnabled,omitempty"`
	// HealthHost is the address the health server binds. [Default: localhost]
	HealthHost *string `json:"healthHost,omitempty"`
	// HealthPort is the TCP port of the health server. [Default: 9099]
	HealthPort *int `json:"healthPort,omitempty"`
	// HealthTimeoutOverrides overrides the watchdog timeouts of named
	// internal components.
	HealthTimeoutOverrides []HealthTimeoutOverride `json:"healthTimeoutOverrides,omitempty"`
	// PrometheusMetricsEnabled turns on the Prometheus metrics server.
	// [Default: false]
	PrometheusMetricsEnabled *bool `json:"prometheusMetricsEnabled,omitempty"`
	// PrometheusMetricsHost is the address the metrics server binds; empty
	// means all addresses.
	PrometheusMetricsHost string `json:"prometheusMetricsHost,omitempty"`
	// PrometheusMetricsPort is the TCP port of the metrics server. [Default: 9091]
	PrometheusMetricsPort *int `json:"prometheusMetricsPort,omitempty"`
	// PrometheusGoMetricsEnabled includes Go runtime metrics. [Default: true]
	PrometheusGoMetricsEnabled *bool `json:"prometheusGoMetricsEnabled,omitempty"`
	// PrometheusProcessMetricsEnabled includes process metrics. [Default: true]
	PrometheusProcessMetricsEnabled *bool `json:"prometheusProcessMetricsEnabled,omitempty"`
	// PrometheusWireGuardMetricsEnabled includes WireGuard metrics. [Default: true]
	PrometheusWireGuardMetricsEnabled *bool `json:"prometheusWireGuardMetricsEnabled,omitempty"`
	// PrometheusMetricsCAFile is the CA certificate file used to verify
	// clients of the TLS /metrics endpoint.
	PrometheusMetricsCAFile *string `json:"prometheusMetricsCAFile,omitempty"`
	// PrometheusMetricsCertFile is the TLS certificate file of the
	// /metrics endpoint.
	PrometheusMetricsCertFile *string `json:"prometheusMetricsCertFile,omitempty"`
	// PrometheusMetricsKeyFile is the private key of PrometheusMetricsCertFile.
	PrometheusMetricsKeyFile *string `json:"prometheusMetricsKeyFile,omitempty"`
	// PrometheusMetricsClientAuth is how the TLS /metrics endpoint checks
	// client certificates: RequireAndVerifyClientCert (the default),
	// RequireAnyClientCert, VerifyClientCertIfGiven or NoClientCert.
	PrometheusMetricsClientAuth *PrometheusMetricsClientAuthType `json:"prometheusMetricsClientAuth,omitempty"`
	// FailsafeInboundHostPorts are protocol/port/CIDR entries always allowed
	// into host endpoints whatever the policy; an empty list disables them.
	// [Default: tcp:22, udp:68, tcp:179, tcp:2379, tcp:2380, tcp:5473,
	// tcp:6443, tcp:6666, tcp:6667]
	FailsafeInboundHostPorts *[]ProtoPort `json:"failsafeInboundHostPorts,omitempty"`
	// FailsafeOutboundHostPorts are protocol/port/CIDR entries always allowed
	// out of host endpoints whatever the policy; an empty list disables them.
	// [Default: udp:53, udp:67, tcp:179, tcp:2379, tcp:2380, tcp:5473,
	// tcp:6443, tcp:6666, tcp:6667]
	FailsafeOutboundHostPorts *[]ProtoPort `json:"failsafeOutboundHostPorts,omitempty"`
	// KubeNodePortRanges are the Kubernetes node port ranges (at most 7, no
	// named ports), used when kube-proxy runs in IPVS mode.
	// [Default: 30000:32767]
	KubeNodePortRanges *[]numorstring.Port `json:"kubeNodePortRanges,omitempty"`
	// PolicySyncPathPrefix is the directory of the policy sync API socket
	// for external services; empty disables it.
	PolicySyncPathPrefix string `json:"policySyncPathPrefix,omitempty"`
	// UsageReportingEnabled sends anonymous version and cluster-size reports.
	// [Default: true]
	UsageReportingEnabled *bool `json:"usageReportingEnabled,omitempty"`
	// UsageReportingInitialDelay is the minimum delay before the first usage
	// report. [Default: 300s]
	UsageReportingInitialDelay *metav1.Duration `json:"usageReportingInitialDelay,omitempty"`
	// UsageReportingInterval is the interval between usage reports.
	// [Default: 86400s]
	UsageReportingInterval *metav1.Duration `json:"usageReportingInterval,omitempty"`
	// NATPortRange is the source port range used by outgoing NAT; unset
	// leaves the choice to the kernel.
	NATPortRange *numorstring.Port `json:"natPortRange,omitempty"`
	// NATOutgoingAddress is the IPv4 source address used for outgoing NAT;
	// unset masquerades to the outgoing interface's address.
	NATOutgoingAddress string `json:"natOutgoingAddress,omitempty"`
	// NATOutgoingExclusions selects which destinations skip outgoing NAT.
	// [Default: IPPoolsOnly]
	NATOutgoingExclusions *NATOutgoingExclusionsType `json:"natOutgoingExclusions,omitempty"`
	// DeviceRouteSourceAddress is the IPv4 source hint on routes Felix
	// programs; unset lets the kernel choose.
	DeviceRouteSourceAddress string `json:"deviceRouteSourceAddress,omitempty"`
	// DeviceRouteSourceAddressIPv6 is the IPv6 source hint on routes Felix
	// programs; unset lets the kernel choose.
	DeviceRouteSourceAddressIPv6 string `json:"deviceRouteSourceAddressIPv6,omitempty"`
	// DeviceRouteProtocol is the routing protocol number Felix tags its
	// routes with. [Default: 3 (boot)]
	DeviceRouteProtocol *int `json:"deviceRouteProtocol,omitempty"`
	// RemoveExternalRoutes makes Felix remove routes to workload interfaces
	// that it did not program. [Default: true]
	RemoveExternalRoutes *bool `json:"removeExternalRoutes,omitempty"`
	// ProgramClusterRoutes makes Felix, not BIRD, program IPIP routes.
	// [Default: Disabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	ProgramClusterRoutes *string `json:"programClusterRoutes,omitempty"`
	// IPForwarding says whether Felix turns on IP forwarding sysctls.
	// [Default: Enabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	IPForwarding string `json:"ipForwarding,omitempty"`
	// ExternalNodesCIDRList lists IPv4 CIDRs of non-Calico nodes whose
	// IPIP/VXLAN traffic is accepted.
	ExternalNodesCIDRList *[]string `json:"externalNodesList,omitempty"`
	// DebugMemoryProfilePath is where Felix writes a heap profile on SIGUSR1.
	DebugMemoryProfilePath string `json:"debugMemoryProfilePath,omitempty"`
	// DebugDisableLogDropping stops Felix dropping log lines when its log
	// buffer is full. [Default: false]
	DebugDisableLogDropping *bool `json:"debugDisableLogDropping,omitempty"`
	// DebugSimulateCalcGraphHangAfter simulates a calculation-graph hang
	// (tests only).
	DebugSimulateCalcGraphHangAfter *metav1.Duration `json:"debugSimulateCalcGraphHangAfter,omitempty"`
	// DebugSimulateDataplaneHangAfter simulates a dataplane hang (tests only).
	DebugSimulateDataplaneHangAfter *metav1.Duration `json:"debugSimulateDataplaneHangAfter,omitempty"`
	// DebugSimulateDataplaneApplyDelay delays every dataplane update (tests
	// only).
	DebugSimulateDataplaneApplyDelay *metav1.Duration `json:"debugSimulateDataplaneApplyDelay,omitempty"`
	// DebugHost is the address of the debug (pprof) server. [Default: localhost]
	DebugHost *string `json:"debugHost,omitempty"`
	// DebugPort, if set, enables the debug (pprof) server on this port.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	DebugPort *int `json:"debugPort,omitempty"`
	// IptablesNATOutgoingInterfaceFilter limits outgoing NAT to interfaces
	// matching this iptables interface pattern (e.g. "eth+").
	IptablesNATOutgoingInterfaceFilter string `json:"iptablesNATOutgoingInterfaceFilter,omitempty"`
	// SidecarAccelerationEnabled turns on experimental sidecar acceleration.
	// [Default: false]
	SidecarAccelerationEnabled *bool `json:"sidecarAccelerationEnabled,omitempty"`
	// XDPEnabled uses XDP to accelerate untracked deny rules. [Default: true]
	XDPEnabled *bool `json:"xdpEnabled,omitempty"`
	// GenericXDPEnabled allows generic (driverless) XDP. [Default: false]
	GenericXDPEnabled *bool `json:"genericXDPEnabled,omitempty"`
	// NFTablesMode turns the nftables dataplane on or off, or Auto.
	// [Default: Auto]
	NFTablesMode *NFTablesMode `json:"nftablesMode,omitempty"`
	// NftablesRefreshInterval is how often Felix re-reads its nftables rules.
	// [Default: 180s]
	NftablesRefreshInterval *metav1.Duration `json:"nftablesRefreshInterval,omitempty"`
	// NftablesFilterAllowAction is the nftables verdict for allowed traffic
	// in the filter table: Accept or Return. [Default: Accept]
	// +kubebuilder:validation:Pattern=`^(?i)(Accept|Return)?$`
	NftablesFilterAllowAction string `json:"nftablesFilterAllowAction,omitempty"`
	// NftablesMangleAllowAction is the nftables verdict for allowed traffic
	// in the mangle table: Accept or Return. [Default: Accept]
	// +kubebuilder:validation:Pattern=`^(?i)(Accept|Return)?$`
	NftablesMangleAllowAction string `json:"nftablesMangleAllowAction,omitempty"`
	// NftablesFilterDenyAction is the nftables verdict for denied traffic:
	// Drop or Reject. [Default: Drop]
	// +kubebuilder:validation:Pattern=`^(?i)(Drop|Reject)?$`
	NftablesFilterDenyAction string `json:"nftablesFilterDenyAction,omitempty"`
	// NftablesMarkMask is the set of packet mark bits Felix may use with
	// nftables: a 32-bit mask with at least 8 bits set. [Default: 0xffff0000]
	// A mask is an unsigned 32-bit value, above int32's range.
	// +kubebuilder:validation:Format=int64
	NftablesMarkMask *uint32 `json:"nftablesMarkMask,omitempty"`

	// BPFEnabled switches Felix to the eBPF dataplane. [Default: false]
	BPFEnabled *bool `json:"bpfEnabled,omitempty"`
	// BPFDisableUnprivileged sets kernel.unprivileged_bpf_disabled so that
	// unprivileged users cannot use BPF. [Default: true]
	BPFDisableUnprivileged *bool `json:"bpfDisableUnprivileged,omitempty"`
	// BPFJITHardening, when Auto, lets Felix lower the kernel's BPF JIT
	// hardening from 2 to 1; Strict leaves it alone. [Default: Auto]
	BPFJITHardening *BPFJITHardeningType `json:"bpfJITHardening,omitempty"`
	// BPFLogLevel is the log level of the BPF programs: Off, Info or Debug.
	// [Default: Off]
	// +optional
	// +kubebuilder:validation:Pattern=`^(?i)(Off|Info|Debug)?$`
	BPFLogLevel string `json:"bpfLogLevel,omitempty"`
	// BPFConntrackLogLevel is the log level of the BPF conntrack cleaner:
	// Off or Debug. [Default: Off]
	// +kubebuilder:validation:Enum=Off;Debug
	BPFConntrackLogLevel string `json:"bpfConntrackLogLevel,omitempty"`
	// BPFConntrackCleanupMode selects how BPF conntrack entries are cleaned
	// up. [Default: Auto]
	BPFConntrackCleanupMode *BPFConntrackMode `json:"bpfConntrackMode,omitempty"`
	// BPFConntrackTimeouts overrides individual BPF conntrack timers.
	BPFConntrackTimeouts *BPFConntrackTimeouts `json:"bpfConntrackTimeouts,omitempty"`
	// BPFLogFilters maps an interface name ("all", "weps", "heps" or a name)
	// to a pcap filter selecting which packets are debug-logged.
	BPFLogFilters *map[string]string `json:"bpfLogFilters,omitempty"`
	// BPFCTLBLogFilter selects what the connect-time load balancer logs at
	// debug level; only "all" is accepted.
	BPFCTLBLogFilter string `json:"bpfCTLBLogFilter,omitempty"`
	// BPFDataIfacePattern is a regular expression matching the host
	// interfaces Felix attaches BPF programs to.
	BPFDataIfacePattern string `json:"bpfDataIfacePattern,omitempty"`
	// BPFL3IfacePattern is a regular expression matching extra L3 (tunnel)
	// interfaces to attach BPF programs to.
	BPFL3IfacePattern string `json:"bpfL3IfacePattern,omitempty"`
	// BPFConnectTimeLoadBalancingEnabled turns the connect-time load balancer
	// on or off. Deprecated: use BPFConnectTimeLoadBalancing.
	BPFConnectTimeLoadBalancingEnabled *bool `json:"bpfConnectTimeLoadBalancingEnabled,omitempty"`
	// BPFConnectTimeLoadBalancing selects the connect-time load balancer
	// mode. [Default: TCP]
	BPFConnectTimeLoadBalancing *BPFConnectTimeLBType `json:"bpfConnectTimeLoadBalancing,omitempty"`
	// BPFHostNetworkedNATWithoutCTLB turns on NAT of host-networked traffic
	// without the connect-time load balancer. [Default: Enabled]
	BPFHostNetworkedNATWithoutCTLB *BPFHostNetworkedNATType `json:"bpfHostNetworkedNATWithoutCTLB,omitempty"`
	// BPFExternalServiceMode selects how external traffic to services is
	// forwarded: Tunnel or DSR. [Default: Tunnel]
	// +kubebuilder:validation:Pattern=`^(?i)(Tunnel|DSR)?$`
	BPFExternalServiceMode string `json:"bpfExternalServiceMode,omitempty"`
	// BPFDSROptoutCIDRs lists client CIDRs for which DSR is not used.
	BPFDSROptoutCIDRs *[]string `json:"bpfDSROptoutCIDRs,omitempty"`
	// BPFExtToServiceConnmark is a 32-bit mark set on connections from
	// external clients to local services. [Default: 0]
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	BPFExtToServiceConnmark *int `json:"bpfExtToServiceConnmark,omitempty"`
	// BPFKubeProxyIptablesCleanupEnabled makes Felix remove kube-proxy's
	// iptables chains in BPF mode. [Default: true]
	BPFKubeProxyIptablesCleanupEnabled *bool `json:"bpfKubeProxyIptablesCleanupEnabled,omitempty"`
	// BPFKubeProxyMinSyncPeriod is the minimum time between updates of the
	// embedded kube-proxy. [Default: 1s]
	BPFKubeProxyMinSyncPeriod *metav1.Duration `json:"bpfKubeProxyMinSyncPeriod,omitempty"`
	// BPFKubeProxyHealthzPort is the port of the embedded kube-proxy's
	// health server. [Default: 10256]
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	BPFKubeProxyHealthzPort *int `json:"bpfKubeProxyHealthzPort,omitempty"`
	// BPFKubeProxyEndpointSlicesEnabled has no effect. Deprecated.
	BPFKubeProxyEndpointSlicesEnabled *bool `json:"bpfKubeProxyEndpointSlicesEnabled,omitempty"`
	// BPFPSNATPorts is the port range used to resolve source port collisions.
	// [Default: 20000:29999]
	BPFPSNATPorts *numorstring.Port `json:"bpfPSNATPorts,omitempty"`
	// BPFMapSizeNATFrontend is the size of the NAT frontend map. [Default: 65536]
	BPFMapSizeNATFrontend *int `json:"bpfMapSizeNATFrontend,omitempty"`
	// BPFMapSizeNATBackend is the size of the NAT backend map. [Default: 262144]
	BPFMapSizeNATBackend *int `json:"bpfMapSizeNATBackend,omitempty"`
	// BPFMapSizeNATAffinity is the size of the NAT affinity map. [Default: 65536]
	BPFMapSizeNATAffinity *int `json:"bpfMapSizeNATAffinity,omitempty"`
	// BPFMapSizeRoute is the size of the routes map. [Default: 262144]
	BPFMapSizeRoute *int `json:"bpfMapSizeRoute,omitempty"`
	// BPFMapSizeConntrack is the size of the conntrack map. [Default: 512000]
	BPFMapSizeConntrack *int `json:"bpfMapSizeConntrack,omitempty"`
	// BPFMapSizePerCPUConntrack, if non-zero, sizes the conntrack map as this
	// value times the number of CPUs. [Default: 0]
	BPFMapSizePerCPUConntrack *int `json:"bpfMapSizePerCpuConntrack,omitempty"`
	// BPFMapSizeConntrackScaling says whether the conntrack map may grow:
	// Disabled or DoubleIfFull. [Default: DoubleIfFull]
	// +kubebuilder:validation:Pattern=`^(?i)(Disabled|DoubleIfFull)?$`
	BPFMapSizeConntrackScaling string `json:"bpfMapSizeConntrackScaling,omitempty"`
	// BPFMapSizeConntrackCleanupQueue is the size of the queue of NAT
	// conntrack entries awaiting cleanup. [Default: 100000]
	// +kubebuilder:validation:Minimum=1
	BPFMapSizeConntrackCleanupQueue *int `json:"bpfMapSizeConntrackCleanupQueue,omitempty"`
	// BPFMapSizeIPSets is the size of the IP sets map. [Default: 1048576]
	BPFMapSizeIPSets *int `json:"bpfMapSizeIPSets,omitempty"`
	// BPFMapSizeIfState is the size of the interface state map. [Default: 1000]
	BPFMapSizeIfState *int `json:"bpfMapSizeIfState,omitempty"`
	// BPFMaglevMaxEndpointsPerService is the largest expected number of
	// endpoints of one Maglev service (1-3000). [Default: 100]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3000
	BPFMaglevMaxEndpointsPerService *int `json:"bpfMaglevMaxEndpointsPerService,omitempty"`
	// BPFMaglevMaxServices is the largest expected number of Maglev services
	// (1-3000). [Default: 100]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=3000
	BPFMaglevMaxServices *int `json:"bpfMaglevMaxServices,omitempty"`
	// BPFHostConntrackBypass bypasses Linux conntrack for workloads and
	// services in BPF mode. [Default: false]
	BPFHostConntrackBypass *bool `json:"bpfHostConntrackBypass,omitempty"`
	// BPFEnforceRPF is the reverse-path filtering mode on BPF interfaces:
	// Disabled, Strict or Loose. [Default: Loose]
	// +kubebuilder:validation:Pattern=`^(?i)(Disabled|Strict|Loose)?$`
	BPFEnforceRPF string `json:"bpfEnforceRPF,omitempty"`
	// BPFPolicyDebugEnabled records policy program details for calico-bpf.
	// [Default: true]
	BPFPolicyDebugEnabled *bool `json:"bpfPolicyDebugEnabled,omitempty"`
	// BPFForceTrackPacketsFromIfaces lists interfaces (iptables patterns such
	// as "docker+") whose traffic is left to Linux conntrack. [Default: docker+]
	BPFForceTrackPacketsFromIfaces *[]string `json:"bpfForceTrackPacketsFromIfaces,omitempty"`
	// BPFDisableGROForIfaces is a regular expression matching interfaces on
	// which Felix disables GRO.
	BPFDisableGROForIfaces string `json:"bpfDisableGROForIfaces,omitempty"`
	// BPFExcludeCIDRsFromNAT lists CIDRs excluded from service NAT.
	BPFExcludeCIDRsFromNAT *[]string `json:"bpfExcludeCIDRsFromNAT,omitempty"`
	// BPFExportBufferSizeMB is the size of the buffer for BPF events sent to
	// Felix. [Default: 1]
	BPFExportBufferSizeMB *int `json:"bpfExportBufferSizeMB,omitempty"`
	// IstioAmbientMode makes Felix work with Tigera's Istio distribution:
	// Enabled or Disabled. [Default: Disabled]
	IstioAmbientMode *IstioAmbientMode `json:"istioAmbientMode,omitempty"`
	// IstioDSCPMark is the DSCP value marking traffic directed to Istio
	// ZTunnel (0-63 or a DSCP name). [Default: 23]
	IstioDSCPMark *intstr.IntOrString `json:"istioDSCPMark,omitempty"`
	// FlowLogsPolicyEvaluationMode says whether active flows' policy traces
	// are re-evaluated. [Default: Continuous]
	FlowLogsPolicyEvaluationMode *FlowLogsPolicyEvaluationModeType `json:"flowLogsPolicyEvaluationMode,omitempty"`
	// BPFRedirectToPeer selects when traffic may be redirected straight to
	// the workload's peer device: Enabled, Disabled or L2Only.
	// +kubebuilder:validation:Enum=Enabled;Disabled;L2Only
	BPFRedirectToPeer string `json:"bpfRedirectToPeer,omitempty"`
	// BPFAttachType selects how BPF programs attach to interfaces: TCX
	// (falling back to TC) or TC. [Default: TCX]
	BPFAttachType *BPFAttachOption `json:"bpfAttachType,omitempty"`
	// FlowLogsFlushInterval is how often Felix exports flow logs. [Default: 300s]
	FlowLogsFlushInterval *metav1.Duration `json:"flowLogsFlushInterval,omitempty"`
	// FlowLogsCollectorDebugTrace logs collector events in full. [Default: false]
	FlowLogsCollectorDebugTrace *bool `json:"flowLogsCollectorDebugTrace,omitempty"`
	// FlowLogsGoldmaneServer is the flow server endpoint flow logs are sent to.
	FlowLogsGoldmaneServer *string `json:"flowLogsGoldmaneServer,omitempty"`
	// FlowLogsLocalReporter turns on the per-node flow log socket.
	// [Default: Disabled]
	// +kubebuilder:validation:Enum=Disabled;Enabled
	FlowLogsLocalReporter *string `json:"flowLogsLocalReporter,omitempty"`
	// BPFProfiling turns on profiling of BPF programs. [Default: Disabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	BPFProfiling string `json:"bpfProfiling,omitempty"`

	// RouteSource selects where Felix learns routes from: CalicoIPAM or
	// WorkloadIPs. [Default: CalicoIPAM]
	// +kubebuilder:validation:Pattern=`^(?i)(WorkloadIPs|CalicoIPAM)?$`
	RouteSource string `json:"routeSource,omitempty"`
	// RouteTableRanges are the Linux routing table indices Felix may use. It
	// replaces RouteTableRange; the two may not both be set.
	RouteTableRanges *RouteTableRanges `json:"routeTableRanges,omitempty"`
	// RouteTableRange is the range of routing table indices (within 1-250)
	// Felix may use. Deprecated: use RouteTableRanges.
	RouteTableRange *RouteTableRange `json:"routeTableRange,omitempty"`
	// RouteSyncDisabled stops Felix programming routes (policy-only mode).
	// [Default: false]
	RouteSyncDisabled *bool `json:"routeSyncDisabled,omitempty"`
	// IPv4NormalRoutePriority is the metric of IPv4 workload routes.
	// [Default: 1024]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483646
	IPv4NormalRoutePriority *int `json:"ipv4NormalRoutePriority,omitempty"`
	// IPv4ElevatedRoutePriority is the metric of preferred IPv4 workload
	// routes (e.g. during live migration). [Default: 512]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483646
	IPv4ElevatedRoutePriority *int `json:"ipv4ElevatedRoutePriority,omitempty"`
	// IPv6NormalRoutePriority is the metric of IPv6 workload routes.
	// [Default: 1024]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483646
	IPv6NormalRoutePriority *int `json:"ipv6NormalRoutePriority,omitempty"`
	// IPv6ElevatedRoutePriority is the metric of preferred IPv6 workload
	// routes. [Default: 512]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483646
	IPv6ElevatedRoutePriority *int `json:"ipv6ElevatedRoutePriority,omitempty"`
	// LiveMigrationRouteConvergenceTime is how long routes keep the
	// elevated priority after a VM live migration completes. [Default: 30s]
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ms|s|m|h))*$`
	LiveMigrationRouteConvergenceTime *metav1.Duration `json:"liveMigrationRouteConvergenceTime,omitempty"`

	// WireguardEnabled turns on WireGuard encryption of IPv4 traffic.
	// [Default: false]
	WireguardEnabled *bool `json:"wireguardEnabled,omitempty"`
	// WireguardEnabledV6 turns on WireGuard encryption of IPv6 traffic.
	// [Default: false]
	WireguardEnabledV6 *bool `json:"wireguardEnabledV6,omitempty"`
	// WireguardThreadingEnabled turns on threaded NAPI for WireGuard devices.
	// [Default: false]
	WireguardThreadingEnabled *bool `json:"wireguardThreadingEnabled,omitempty"`
	// WireguardListeningPort is the UDP port of IPv4 WireGuard. [Default: 51820]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	WireguardListeningPort *int `json:"wireguardListeningPort,omitempty"`
	// WireguardListeningPortV6 is the UDP port of IPv6 WireGuard. [Default: 51821]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	WireguardListeningPortV6 *int `json:"wireguardListeningPortV6,omitempty"`
	// WireguardRoutingRulePriority is the priority of WireGuard's routing
	// rule (1-32765). [Default: 99]
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=32765
	WireguardRoutingRulePriority *int `json:"wireguardRoutingRulePriority,omitempty"`
	// WireguardInterfaceName is the IPv4 WireGuard device. [Default: wireguard.cali]
	WireguardInterfaceName string `json:"wireguardInterfaceName,omitempty"`
	// WireguardInterfaceNameV6 is the IPv6 WireGuard device. [Default: wg-v6.cali]
	WireguardInterfaceNameV6 string `json:"wireguardInterfaceNameV6,omitempty"`
	// WireguardMTU is the MTU of the IPv4 WireGuard device; 0 auto-detects.
	// [Default: 0]
	WireguardMTU *int `json:"wireguardMTU,omitempty"`
	// WireguardMTUV6 is the MTU of the IPv6 WireGuard device; 0 auto-detects.
	// [Default: 0]
	WireguardMTUV6 *int `json:"wireguardMTUV6,omitempty"`
	// WireguardHostEncryptionEnabled also encrypts host-to-host traffic.
	// [Default: false]
	WireguardHostEncryptionEnabled *bool `json:"wireguardHostEncryptionEnabled,omitempty"`
	// WireguardPersistentKeepAlive is WireGuard's persistent keepalive
	// interval; 0 disables it. [Default: 0s]
	WireguardPersistentKeepAlive *metav1.Duration `json:"wireguardKeepAlive,omitempty"`

	// AWSSrcDstCheck says what Felix does to the EC2 source/destination
	// check. [Default: DoNothing]
	AWSSrcDstCheck *AWSSrcDstCheckOption `json:"awsSrcDstCheck,omitempty"`
	// ServiceLoopPrevention is what happens to traffic to advertised but
	// unused service IPs: Drop, Reject or Disabled. [Default: Drop]
	// +kubebuilder:validation:Pattern=`^(?i)(Drop|Reject|Disabled)?$`
	ServiceLoopPrevention string `json:"serviceLoopPrevention,omitempty"`
	// WorkloadSourceSpoofing says whether pods may ask (by annotation) to
	// send from addresses that are not theirs: Disabled or Any.
	// [Default: Disabled]
	// +kubebuilder:validation:Pattern=`^(?i)(Disabled|Any)?$`
	WorkloadSourceSpoofing string `json:"workloadSourceSpoofing,omitempty"`
	// MTUIfacePattern is a regular expression matching the interfaces whose
	// MTU Felix uses to compute the host MTU.
	MTUIfacePattern string `json:"mtuIfacePattern,omitempty"`
	// FloatingIPs turns on programming of non-OpenStack floating IPs.
	// [Default: Disabled]
	FloatingIPs *FloatingIPType `json:"floatingIPs,omitempty"`
	// WindowsManageFirewallRules lets Felix open its own ports in the Windows
	// Firewall. [Default: Disabled]
	WindowsManageFirewallRules *WindowsManageFirewallRulesMode `json:"windowsManageFirewallRules,omitempty"`
	// GoGCThreshold sets the Go GC percentage; -1 disables GC. [Default: 40]
	// +kubebuilder:validation:Minimum=-1
	GoGCThreshold *int `json:"goGCThreshold,omitempty"`
	// GoMemoryLimitMB sets the Go soft memory limit in MB; -1 disables it.
	// [Default: -1]
	// +kubebuilder:validation:Minimum=-1
	GoMemoryLimitMB *int `json:"goMemoryLimitMB,omitempty"`
	// GoMaxProcs sets GOMAXPROCS; -1 keeps the runtime's choice. [Default: -1]
	// +kubebuilder:validation:Minimum=-1
	GoMaxProcs *int `json:"goMaxProcs,omitempty"`
	// RequireMTUFile makes Felix wait for the MTU file before starting.
	// [Default: false]
	RequireMTUFile *bool `json:"requireMTUFile,omitempty"`
	// CgroupV2Path is the cgroup v2 mount used by the BPF connect-time load
	// balancer (read by Felix's init container).
	CgroupV2Path string `json:"cgroupV2Path,omitempty"`
}

// HealthTimeoutOverride sets the watchdog timeout of one internal component
// (the names appear in Felix's logs).
type HealthTimeoutOverride struct {
	// Name is the component's name.
	Name string `json:"name"`
	// Timeout is its new timeout.
	Timeout metav1.Duration `json:"timeout"`
}

// RouteTableRange is an inclusive range of Linux routing table indices
// within 1-250.
type RouteTableRange struct {
	// Min is the first index.
	Min int `json:"min"`
	// Max is the last index.
	Max int `json:"max"`
}

// RouteTableIDRange is an inclusive range of Linux routing table indices.
type RouteTableIDRange struct {
	// Min is the first index (at least 1).
	Min int `json:"min"`
	// Max is the last index.
	Max int `json:"max"`
}

// RouteTableRanges is a list of routing table index ranges.
type RouteTableRanges []RouteTableIDRange

// NumDesignatedTables counts the table indices the ranges cover (ranges are
// inclusive; overlaps are counted twice).
func (r RouteTableRanges) NumDesignatedTables() int {
	n := 0
	for _, rng := range r {
		n += rng.Max - rng.Min + 1
	}
	return n
}

// ProtoPort is a protocol, a port and an optional source/destination CIDR,
// as used by the failsafe port lists.
type ProtoPort struct {
	// Protocol is tcp, udp or sctp (any case); empty means tcp.
	Protocol string `json:"protocol,omitempty"`
	// Port is the port number.
	Port uint16 `json:"port"`
	// Net, if set, limits the entry to this CIDR.
	// +optional
	Net string `json:"net,omitempty"`
}

// BPFConntrackTimeout is a duration such as "30s" or "Auto" (take the value
// from the matching Linux conntrack sysctl).
// +kubebuilder:validation:Pattern=`^(([0-9]*(\.[0-9]*)?(ms|s|h|m|us)+)+|Auto)$`
type BPFConntrackTimeout string

// BPFConntrackTimeouts overrides the BPF conntrack timers; unset timers keep
// Felix's defaults.
type BPFConntrackTimeouts struct {
	// CreationGracePeriod protects new connections from cleanup. [Default: 10s]
	CreationGracePeriod *BPFConntrackTimeout `json:"creationGracePeriod,omitempty"`
	// TCPSynSent applies after an unanswered SYN. [Default: 20s]
	TCPSynSent *BPFConntrackTimeout `json:"tcpSynSent,omitempty"`
	// TCPEstablished applies to idle established connections. [Default: 1h]
	TCPEstablished *BPFConntrackTimeout `json:"tcpEstablished,omitempty"`
	// TCPFinsSeen applies after a graceful close. [Default: Auto]
	TCPFinsSeen *BPFConntrackTimeout `json:"tcpFinsSeen,omitempty"`
	// TCPResetSeen applies after a reset. [Default: 40s]
	TCPResetSeen *BPFConntrackTimeout `json:"tcpResetSeen,omitempty"`
	// UDPTimeout applies to idle UDP flows. [Default: 60s]
	UDPTimeout *BPFConntrackTimeout `json:"udpTimeout,omitempty"`
	// GenericTimeout applies to idle flows of other protocols. [Default: 10m]
	GenericTimeout *BPFConntrackTimeout `json:"genericTimeout,omitempty"`
	// ICMPTimeout applies to idle ICMP flows. [Default: 5s]
	ICMPTimeout *BPFConntrackTimeout `json:"icmpTimeout,omitempty"`
}

// Default implements Resource. Like Calico's client on create and update,
// it sets floatingIPs (Disabled), bpfConnectTimeLoadBalancing (TCP) and
// bpfHostNetworkedNATWithoutCTLB (Enabled) when unset, and translates the
// deprecated bpfConnectTimeLoadBalancingEnabled into those two fields. All
// other fields stay unset: Felix applies its built-in defaults (FelixDefaults)
// at run time, so a node override does not pin values the global object set.
func (c *FelixConfiguration) Default() {
	s := &c.Spec
	if s.FloatingIPs == nil {
		s.FloatingIPs = new(FloatingIPsDisabled)
	}
	if s.BPFConnectTimeLoadBalancing == nil {
		s.BPFConnectTimeLoadBalancing = new(BPFConnectTimeLBTCP)
	}
	if s.BPFHostNetworkedNATWithoutCTLB == nil {
		s.BPFHostNetworkedNATWithoutCTLB = new(BPFHostNetworkedNATEnabled)
	}
	if s.BPFConnectTimeLoadBalancingEnabled != nil {
		s.BPFHostNetworkedNATWithoutCTLB = new(BPFHostNetworkedNATDisabled)
		mode := BPFConnectTimeLBDisabled
		if *s.BPFConnectTimeLoadBalancingEnabled {
			mode = BPFConnectTimeLBEnabled
		}
		s.BPFConnectTimeLoadBalancing = &mode
	}
}

// FelixConfigurationNodeName returns the node a per-node FelixConfiguration
// name ("node.<nodename>") applies to, and false for any other name.
func FelixConfigurationNodeName(name string) (string, bool) {
	node, ok := strings.CutPrefix(name, FelixConfigurationNamePrefix)
	if !ok || node == "" {
		return "", false
	}
	return node, true
}

// PrometheusMetricsClientAuthType is how the TLS metrics endpoint checks
// client certificates.
type PrometheusMetricsClientAuthType string

// Values of PrometheusMetricsClientAuthType.
const (
	RequireAndVerifyClientCert PrometheusMetricsClientAuthType = "RequireAndVerifyClientCert"
	RequireAnyClientCert       PrometheusMetricsClientAuthType = "RequireAnyClientCert"
	VerifyClientCertIfGiven    PrometheusMetricsClientAuthType = "VerifyClientCertIfGiven"
	NoClientCert               PrometheusMetricsClientAuthType = "NoClientCert"
)

// IstioAmbientMode is Enabled or Disabled.
// +kubebuilder:validation:Enum=Enabled;Disabled
type IstioAmbientMode string

// Values of IstioAmbientMode.
const (
	IstioAmbientModeEnabled  IstioAmbientMode = "Enabled"
	IstioAmbientModeDisabled IstioAmbientMode = "Disabled"
)
