package config

// Why settings are refused, and what runs instead.
const (
	rBPF     = "the eBPF dataplane is not implemented: felix programs iptables and ipsets (keep kube-proxy for Services)"
	rBPFOnly = "used only by the eBPF dataplane, which Tabby does not have: felix programs iptables"
	rWG      = "WireGuard devices run with the kernel's default (non-threaded) NAPI, and felix exports no WireGuard metrics"
	rNFTOnly = "felix's nftables dataplane accepts for allowed and drops denied packets, with Calico's default marks, and does not offload flows"
	rXDP     = "XDP is not implemented: untracked (doNotTrack) policy runs in the iptables raw table"
	rOStack  = "OpenStack support is not implemented"
	rDebug   = "felix's debugging hooks are not implemented"
	rReport  = "felix does not report its own or its endpoints' status to the datastore (endpoint status files are written, see EndpointStatusPathPrefix)"
	rUsage   = "Tabby never reports usage"
	rRoute   = "felix programs routes in the main routing table with Calico's defaults only"
	rEncap   = "felix creates tunl0 and vxlan.calico as the IP pools' ipipMode/vxlanMode need them; remove the setting and set the pools' modes"
	rTunAddr = "tunnel addresses come from the Node resource (written by calico-node), not from felix's configuration"
	rIpt     = "felix renders ACCEPT for allowed and DROP for denied packets only"
	rLock    = "felix's iptables-restore runs with the iptables tools' own locking"
	rMetTLS  = "the Prometheus endpoint serves plain HTTP only (put a TLS proxy in front)"
	rIstio   = "Istio ambient mode support is not implemented"
)

// h is an honoured setting, r a refused one.
func h(name, field string, k Kind, def string) Param {
	return Param{Name: name, Field: field, Kind: k, Default: def}
}

func r(name, field string, k Kind, def, reason string, allowed ...string) Param {
	return Param{Name: name, Field: field, Kind: k, Default: def, Class: Refused, Reason: reason, Allowed: allowed}
}

// never refuses every value that is set.
var never = []string{}

func (p Param) live() Param  { p.Live = true; return p }
func (p Param) local() Param { p.Local = true; return p }
func (p Param) die() Param   { p.DieOnFail = true; return p }
func (p Param) nz() Param    { p.NonZero = true; return p }
func (p Param) sec() Param   { p.Security = true; return p }
func (p Param) allow(v ...string) Param {
	p.Allowed = v
	return p
}

// Params are all of felix's settings: Calico's felix/config parameters
// (names, types, defaults, die-on-fail and local-only flags as Calico has
// them) and every FelixConfigurationSpec field. TestEverySpecFieldClassified
// walks the API type so that none is missing.
var Params = []Param{
	// The datastore connection and identity (environment and file only).
	h("DatastoreType", "", OneOf("kubernetes", "etcdv3"), "etcdv3").local().nz().die(),
	h("FelixHostname", "", KindString, "").local().nz(),
	h("EtcdAddr", "", KindString, "127.0.0.1:2379").local(),
	h("EtcdScheme", "", OneOf("http", "https"), "http").local(),
	h("EtcdKeyFile", "", KindString, "").local(),
	h("EtcdCertFile", "", KindString, "").local(),
	h("EtcdCaFile", "", KindString, "").local(),
	h("EtcdEndpoints", "", KindString, "").local(),
	// Typha (typha/): felix follows the datastore through it when
	// TyphaAddr or TyphaK8sServiceName is set. Its client certificate is
	// felix's for the Goldmane flow server too (Calico's).
	h("TyphaAddr", "", KindString, "").local(),
	h("TyphaK8sServiceName", "", KindString, "").local(),
	h("TyphaK8sNamespace", "", KindString, "kube-system").local().nz(),
	h("TyphaReadTimeout", "", KindSeconds, "30").local(),
	h("TyphaWriteTimeout", "", KindSeconds, "10").local(),
	h("TyphaKeyFile", "", KindString, "").local(),
	h("TyphaCertFile", "", KindString, "").local(),
	h("TyphaCAFile", "", KindString, "").local(),
	h("TyphaCN", "", KindString, "").local(),
	h("TyphaURISAN", "", KindString, "").local(),

	// Dataplane choice.
	r("UseInternalDataplaneDriver", "UseInternalDataplaneDriver", KindBool, "true", "felix always programs the dataplane itself"),
	r("DataplaneDriver", "DataplaneDriver", KindString, "calico-iptables-plugin", "external dataplane drivers are not supported: felix programs iptables itself").nz().die(),
	h("DataplaneWatchdogTimeout", "DataplaneWatchdogTimeout", KindSeconds, "90"),
	r("BPFEnabled", "BPFEnabled", KindBool, "false", rBPF).sec(),
	h("NFTablesMode", "NFTablesMode", OneOf("Enabled", "Disabled", "Auto"), "Auto"),
	h("WireguardEnabled", "WireguardEnabled", KindBool, "false"),
	h("WireguardEnabledV6", "WireguardEnabledV6", KindBool, "false"),
	h("WireguardListeningPort", "WireguardListeningPort", KindInt, "51820"),
	h("WireguardListeningPortV6", "WireguardListeningPortV6", KindInt, "51821"),
	h("WireguardRoutingRulePriority", "WireguardRoutingRulePriority", KindInt, "99"),
	h("WireguardInterfaceName", "WireguardInterfaceName", KindString, "wireguard.cali").nz(),
	h("WireguardInterfaceNameV6", "WireguardInterfaceNameV6", KindString, "wg-v6.cali").nz(),
	h("WireguardMTU", "WireguardMTU", KindInt, "0"),
	h("WireguardMTUV6", "WireguardMTUV6", KindInt, "0"),
	h("WireguardHostEncryptionEnabled", "WireguardHostEncryptionEnabled", KindBool, "false"),
	h("WireguardPersistentKeepAlive", "WireguardPersistentKeepAlive", KindSeconds, "0"),
	r("WireguardThreadingEnabled", "WireguardThreadingEnabled", KindBool, "false", rWG),

	// iptables.
	h("Ipv6Support", "IPv6Support", KindBool, "true"),
	h("IptablesBackend", "IptablesBackend", OneOf("Legacy", "NFT", "Auto"), "Auto"),
	h("IptablesRefreshInterval", "IptablesRefreshInterval", KindSeconds, "180"),
	r("IptablesPostWriteCheckIntervalSecs", "IptablesPostWriteCheckInterval", KindSeconds, "5", "felix re-reads iptables every IptablesRefreshInterval only"),
	r("IptablesLockFilePath", "IptablesLockFilePath", KindString, "/run/xtables.lock", rLock),
	r("IptablesLockTimeoutSecs", "IptablesLockTimeout", KindSeconds, "0", rLock),
	r("IptablesLockProbeIntervalMillis", "IptablesLockProbeInterval", KindMillis, "50", rLock),
	h("ChainInsertMode", "ChainInsertMode", OneOf("insert", "append"), "insert").nz().die(),
	h("IptablesMarkMask", "IptablesMarkMask", KindMarkMask, "0xffff0000").nz().die(),
	r("IptablesFilterAllowAction", "IptablesFilterAllowAction", OneOf("ACCEPT", "RETURN"), "ACCEPT", rIpt).nz().die().sec(),
	r("IptablesMangleAllowAction", "IptablesMangleAllowAction", OneOf("ACCEPT", "RETURN"), "ACCEPT", rIpt).nz().die(),
	r("IptablesFilterDenyAction", "IptablesFilterDenyAction", OneOf("DROP", "REJECT"), "DROP", rIpt).nz().die(),
	r("IptablesNATOutgoingInterfaceFilter", "IptablesNATOutgoingInterfaceFilter", KindString, "", "NAT outgoing applies to traffic leaving any interface"),
	r("IpsetsRefreshInterval", "IpsetsRefreshInterval", KindSeconds, "90", "ipsets are re-read with iptables, every IptablesRefreshInterval"),
	r("MaxIpsetSize", "MaxIpsetSize", KindInt, "1048576", "ipsets are created with the kernel's default maximum size").nz(),
	r("FeatureDetectOverride", "FeatureDetectOverride", KindOpaque, "", "felix detects nothing it could override"),
	r("FeatureGates", "FeatureGates", KindOpaque, "", "Tabby has no feature gates"),
	r("DisableConntrackInvalidCheck", "DisableConntrackInvalidCheck", KindBool, "false", "felix always drops conntrack-INVALID packets"),
	h("InterfacePrefix", "InterfacePrefix", KindIfaceList, "cali").live().nz().die(),
	r("InterfaceExclude", "InterfaceExclude", KindOpaque, "kube-ipvs0", "felix's interface exclusions are fixed (kube-ipvs0)"),
	r("InterfaceRefreshInterval", "InterfaceRefreshInterval", KindSeconds, "90", "interface addresses are re-read every 10 s while a host endpoint needs them"),
	h("DefaultEndpointToHostAction", "DefaultEndpointToHostAction", OneOf("DROP", "RETURN", "ACCEPT"), "DROP").live().nz().die(),
	h("FailsafeInboundHostPorts", "FailsafeInboundHostPorts", KindPortList, "tcp:22,udp:68,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667").live().die(),
	h("FailsafeOutboundHostPorts", "FailsafeOutboundHostPorts", KindPortList, "udp:53,udp:67,tcp:179,tcp:2379,tcp:2380,tcp:5473,tcp:6443,tcp:6666,tcp:6667").live().die(),
	r("KubeNodePortRanges", "KubeNodePortRanges", KindOpaque, "30000:32767", "host endpoint policy does not treat node ports specially"),
	h("LogPrefix", "LogPrefix", KindString, "calico-packet").live(),
	r("LogActionRateLimit", "LogActionRateLimit", KindString, "", "Log rules are not rate limited"),
	r("LogActionRateLimitBurst", "LogActionRateLimitBurst", IntRange(0, 9999), "5", "Log rules are not rate limited"),
	r("ServiceLoopPrevention", "ServiceLoopPrevention", OneOf("Drop", "Reject", "Disabled"), "Drop", "service loop prevention is not implemented: no rules drop traffic to unused service IPs", "Disabled"),
	r("WorkloadSourceSpoofing", "WorkloadSourceSpoofing", OneOf("Disabled", "Any"), "Disabled", "workloads can never send from addresses they do not own (strict RPF)"),
	r("AllowVXLANPacketsFromWorkloads", "AllowVXLANPacketsFromWorkloads", KindBool, "false", "VXLAN packets from workloads are always dropped"),
	r("AllowIPIPPacketsFromWorkloads", "AllowIPIPPacketsFromWorkloads", KindBool, "false", "IPIP packets from workloads are always dropped"),

	// NAT.
	h("NATOutgoingAddress", "NATOutgoingAddress", KindIPv4, "").live(),
	r("NATPortRange", "NATPortRange", KindOpaque, "", "NAT outgoing uses the kernel's source port choice"),
	r("NATOutgoingExclusions", "NATOutgoingExclusions", OneOf("IPPoolsOnly", "IPPoolsAndHostIPs"), "IPPoolsOnly", "NAT outgoing excludes destinations in IP pools only"),

	// Logging.
	h("LogFilePath", "LogFilePath", KindString, "/var/log/calico/felix.log").die(),
	h("LogSeverityFile", "LogSeverityFile", KindLogLevel, "INFO").live(),
	h("LogSeverityScreen", "LogSeverityScreen", KindLogLevel, "INFO").live(),
	r("LogSeveritySys", "LogSeveritySys", KindLogLevel, "INFO", "syslog is not implemented: felix logs to the screen and to LogFilePath", ""),
	r("LogDebugFilenameRegex", "LogDebugFilenameRegex", KindRegexp, "", "debug logs cannot be filtered by source file"),

	// Encapsulation and routes.
	r("IpInIpEnabled", "IPIPEnabled", KindBool, "", rEncap, never...),
	h("IpInIpMtu", "IPIPMTU", KindInt, "0"),
	r("IpInIpTunnelAddr", "", KindIPv4, "", rTunAddr),
	r("VXLANEnabled", "VXLANEnabled", KindBool, "", rEncap, never...),
	h("VXLANMTU", "VXLANMTU", KindInt, "0"),
	h("VXLANMTUV6", "VXLANMTUV6", KindInt, "0"),
	r("VXLANPort", "VXLANPort", KindInt, "4789", "VXLAN uses Calico's default port 4789"),
	r("VXLANVNI", "VXLANVNI", KindInt, "4096", "VXLAN uses Calico's default VNI 4096"),
	r("IPv4VXLANTunnelAddr", "", KindIPv4, "", rTunAddr),
	r("IPv6VXLANTunnelAddr", "", KindIPv6, "", rTunAddr),
	r("VXLANTunnelMACAddr", "", KindString, "", rTunAddr),
	r("VXLANTunnelMACAddrV6", "", KindString, "", rTunAddr),
	h("MTUIfacePattern", "MTUIfacePattern", KindRegexp, `^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`),
	r("RequireMTUFile", "RequireMTUFile", KindBool, "false", "felix does not wait for an MTU file"),
	h("RouteRefreshInterval", "RouteRefreshInterval", KindSeconds, "90"),
	r("RouteSource", "RouteSource", OneOf("WorkloadIPs", "CalicoIPAM"), "CalicoIPAM", "routes follow Calico IPAM blocks"),
	r("RouteTableRange", "RouteTableRange", KindOpaque, "", rRoute).die(),
	r("RouteTableRanges", "RouteTableRanges", KindOpaque, "", rRoute).die(),
	r("RouteSyncDisabled", "RouteSyncDisabled", KindBool, "false", "felix always programs routes"),
	r("IPv4NormalRoutePriority", "IPv4NormalRoutePriority", IntRange(1, 2147483646), "1024", rRoute),
	r("IPv4ElevatedRoutePriority", "IPv4ElevatedRoutePriority", IntRange(1, 2147483646), "512", rRoute),
	r("IPv6NormalRoutePriority", "IPv6NormalRoutePriority", IntRange(1, 2147483646), "1024", rRoute),
	r("IPv6ElevatedRoutePriority", "IPv6ElevatedRoutePriority", IntRange(1, 2147483646), "512", rRoute),
	r("LiveMigrationRouteConvergenceTime", "LiveMigrationRouteConvergenceTime", KindSeconds, "30", "live migration is not implemented"),
	r("DeviceRouteSourceAddress", "DeviceRouteSourceAddress", KindIPv4, "", rRoute),
	r("DeviceRouteSourceAddressIPv6", "DeviceRouteSourceAddressIPv6", KindIPv6, "", rRoute),
	r("DeviceRouteProtocol", "DeviceRouteProtocol", KindInt, "3", rRoute),
	r("RemoveExternalRoutes", "RemoveExternalRoutes", KindBool, "true", rRoute),
	r("ProgramClusterRoutes", "ProgramClusterRoutes", OneOf("Enabled", "Disabled", "EnabledIPIPOnly", "EnabledNoEncapOnly"), "EnabledIPIPOnly", rRoute),
	r("IPForwarding", "IPForwarding", OneOf("Enabled", "Disabled"), "Enabled", "felix always enables IP forwarding"),
	r("ExternalNodesCIDRList", "ExternalNodesCIDRList", KindCIDRList, "", "external nodes are not supported").die(),
	r("NetlinkTimeoutSecs", "NetlinkTimeout", KindSeconds, "10", "netlink calls use fixed timeouts"),
	r("FloatingIPs", "FloatingIPs", OneOf("Enabled", "Disabled"), "Disabled", "floating IPs are not implemented"),
	r("AWSSrcDstCheck", "AWSSrcDstCheck", OneOf("DoNothing", "Enable", "Disable"), "DoNothing", "felix never changes the AWS source/destination check").nz(),
	r("LocalSubnetL2Reachability", "", OneOf("Disabled", "PodsAndLoadBalancers"), "Disabled", rRoute),
	r("LocalSubnetL2ReachabilityRefreshInterval", "", KindSeconds, "120", rRoute),

	// Status reporting and health.
	r("ReportingIntervalSecs", "ReportingInterval", KindSeconds, "30", rReport, "0"), // 0: off, which is what felix does (calico-node writes it)
	r("ReportingTTLSecs", "ReportingTTL", KindSeconds, "90", rReport),
	r("EndpointReportingEnabled", "EndpointReportingEnabled", KindBool, "false", rReport),
	r("EndpointReportingDelaySecs", "EndpointReportingDelay", KindSeconds, "1", rReport),
	h("EndpointStatusPathPrefix", "EndpointStatusPathPrefix", KindString, "/var/run/calico"),
	h("HealthEnabled", "HealthEnabled", KindBool, "false"),
	h("HealthHost", "HealthHost", KindString, "localhost"),
	h("HealthPort", "HealthPort", KindPort, "9099"),
	r("HealthTimeoutOverrides", "HealthTimeoutOverrides", KindOpaque, "", "per-reporter health timeouts are fixed; the loop timeout is DataplaneWatchdogTimeout"),
	h("PrometheusMetricsEnabled", "PrometheusMetricsEnabled", KindBool, "false"),
	h("PrometheusMetricsHost", "PrometheusMetricsHost", KindString, ""),
	h("PrometheusMetricsPort", "PrometheusMetricsPort", KindPort, "9091"),
	h("PrometheusGoMetricsEnabled", "PrometheusGoMetricsEnabled", KindBool, "true"),
	h("PrometheusProcessMetricsEnabled", "PrometheusProcessMetricsEnabled", KindBool, "true"),
	// Without WireGuard there are no WireGuard metrics, as in Calico.
	r("PrometheusWireGuardMetricsEnabled", "PrometheusWireGuardMetricsEnabled", KindBool, "true", rWG, "true", "false"),
	r("PrometheusMetricsCAFile", "PrometheusMetricsCAFile", KindString, "", rMetTLS).sec(),
	r("PrometheusMetricsCertFile", "PrometheusMetricsCertFile", KindString, "", rMetTLS).sec(),
	r("PrometheusMetricsKeyFile", "PrometheusMetricsKeyFile", KindString, "", rMetTLS).sec(),
	r("PrometheusMetricsClientAuth", "PrometheusMetricsClientAuth", OneOf("RequireAndVerifyClientCert", "RequireAnyClientCert", "VerifyClientCertIfGiven", "NoClientCert"), "NoClientCert", rMetTLS).sec(),
	r("UsageReportingEnabled", "UsageReportingEnabled", KindBool, "true", rUsage, "false"),
	r("UsageReportingInitialDelaySecs", "UsageReportingInitialDelay", KindSeconds, "300", rUsage),
	r("UsageReportingIntervalSecs", "UsageReportingInterval", KindSeconds, "86400", rUsage),
	r("ClusterGUID", "", KindString, "baddecaf", rUsage),
	r("ClusterType", "", KindString, "", "the cluster type only tags usage reports, which Tabby never sends", "k8s,bgp", "k8s", "kdd,k8s,bgp", "kdd", "k8s,bgp,kubeadm"),
	r("CalicoVersion", "", KindString, "", rUsage),
	r("Variant", "", KindString, "Calico", "Tabby is Calico-compatible, not a variant"),
	r("PolicySyncPathPrefix", "PolicySyncPathPrefix", KindString, "", "the policy sync API (for Dikastes/Envoy) is not implemented").sec(),
	r("NodeSelector", "NodeSelector", KindString, "", "FelixConfiguration nodeSelector is not supported: use a node.<name> FelixConfiguration per node"),

	// Go runtime.
	h("GoGCThreshold", "GoGCThreshold", IntRange(-1, 1<<30), "40"),
	h("GoMemoryLimitMB", "GoMemoryLimitMB", IntRange(-1, 1<<30), "-1"),
	h("GoMaxProcs", "GoMaxProcs", IntRange(-1, 1<<16), "-1"),

	// OpenStack, Windows, XDP, sidecars, Istio, flow logs.
	r("MetadataAddr", "MetadataAddr", KindString, "127.0.0.1", rOStack).die(),
	r("MetadataPort", "MetadataPort", KindPort, "8775", rOStack).die(),
	r("OpenstackRegion", "OpenstackRegion", KindString, "", rOStack).die(),
	r("WindowsManageFirewallRules", "WindowsManageFirewallRules", OneOf("Enabled", "Disabled"), "Disabled", "Windows only: no effect on Linux, as in Calico", "Enabled", "Disabled"),
	r("XDPEnabled", "XDPEnabled", KindBool, "true", rXDP, "false"),
	r("GenericXDPEnabled", "GenericXDPEnabled", KindBool, "false", rXDP),
	r("XDPRefreshInterval", "XDPRefreshInterval", KindSeconds, "90", rXDP),
	r("SidecarAccelerationEnabled", "SidecarAccelerationEnabled", KindBool, "false", "sidecar acceleration is not implemented"),
	r("IstioAmbientMode", "IstioAmbientMode", OneOf("Disabled", "Enabled"), "Disabled", rIstio).sec(),
	r("IstioDSCPMark", "IstioDSCPMark", KindOpaque, "23", rIstio),
	// Flow logs (felix/collector): honoured with the local reporter.
	h("FlowLogsFlushInterval", "FlowLogsFlushInterval", KindSeconds, "300").nz(),
	h("FlowLogsCollectorDebugTrace", "FlowLogsCollectorDebugTrace", KindBool, "false"),
	h("FlowLogsGoldmaneServer", "FlowLogsGoldmaneServer", KindString, ""),
	h("FlowLogsLocalReporter", "FlowLogsLocalReporter", OneOf("Enabled", "Disabled"), "Disabled"),
	h("FlowLogsPolicyEvaluationMode", "FlowLogsPolicyEvaluationMode", OneOf("None", "Continuous"), "Continuous"),

	// Debugging.
	r("DebugMemoryProfilePath", "DebugMemoryProfilePath", KindString, "", rDebug),
	r("DebugCPUProfilePath", "", KindString, "/tmp/felix-cpu-<timestamp>.pprof", rDebug),
	r("DebugDisableLogDropping", "DebugDisableLogDropping", KindBool, "false", "felix never drops log lines", "true", "false"),
	// Honoured (as Calico's): they make the liveness probe's stall detection testable.
	h("DebugSimulateCalcGraphHangAfter", "DebugSimulateCalcGraphHangAfter", KindSeconds, "0"),
	h("DebugSimulateDataplaneHangAfter", "DebugSimulateDataplaneHangAfter", KindSeconds, "0"),
	r("DebugSimulateDataplaneApplyDelay", "DebugSimulateDataplaneApplyDelay", KindSeconds, "0", rDebug),
	r("DebugPanicAfter", "", KindSeconds, "0", rDebug),
	r("DebugSimulateDataRace", "", KindBool, "false", rDebug),
	// Honoured (as Calico's): Go's pprof handlers on DebugHost:DebugPort.
	h("DebugHost", "DebugHost", KindString, "localhost"),
	h("DebugPort", "DebugPort", KindPort, ""),
	r("DebugBPFCgroupV2", "", KindString, "", rBPFOnly).local(),

	// nftables.
	h("NftablesRefreshInterval", "NftablesRefreshInterval", KindSeconds, "180"),
	r("NftablesFilterAllowAction", "NftablesFilterAllowAction", OneOf("ACCEPT", "RETURN"), "ACCEPT", rNFTOnly).nz().die(),
	r("NftablesMangleAllowAction", "NftablesMangleAllowAction", OneOf("ACCEPT", "RETURN"), "ACCEPT", rNFTOnly).nz().die(),
	r("NftablesFilterDenyAction", "NftablesFilterDenyAction", OneOf("DROP", "REJECT"), "DROP", rNFTOnly).nz().die(),
	r("NftablesMarkMask", "NftablesMarkMask", KindMarkMask, "0xffff0000", rNFTOnly).nz().die(),
	r("NFTablesFlowTableOffload", "", OneOf("All", "Disabled"), "Disabled", rNFTOnly),
	r("NFTablesFlowTableDataIfacePattern", "", KindRegexp, "", rNFTOnly),

	// eBPF.
	r("BPFOverlayHostSourceIP", "", OneOf("TunnelAddress", "HostAddress"), "TunnelAddress", rBPFOnly).nz(),
	r("BPFDisableUnprivileged", "BPFDisableUnprivileged", KindBool, "true", rBPFOnly),
	r("BPFJITHardening", "BPFJITHardening", OneOf("Auto", "Strict"), "Auto", rBPFOnly).nz(),
	r("BPFLogLevel", "BPFLogLevel", OneOf("off", "info", "debug"), "off", rBPFOnly).nz(),
	r("BPFConntrackLogLevel", "BPFConntrackLogLevel", OneOf("off", "debug"), "off", rBPFOnly).nz(),
	r("BPFConntrackCleanupMode", "BPFConntrackCleanupMode", OneOf("Auto", "Userspace", "BPFProgram"), "Auto", rBPFOnly),
	r("BPFConntrackTimeouts", "BPFConntrackTimeouts", KindOpaque, "", rBPFOnly),
	r("BPFIPFragTimeout", "", KindSeconds, "0", rBPFOnly),
	r("BPFIPFragmentReassemblyEnabled", "", KindBool, "true", rBPFOnly),
	r("BPFLogFilters", "BPFLogFilters", KindOpaque, "", rBPFOnly),
	r("BPFCTLBLogFilter", "BPFCTLBLogFilter", OneOf("all"), "", rBPFOnly),
	r("BPFDataIfacePattern", "BPFDataIfacePattern", KindRegexp, `^((en|wl|ww|sl|ib)[Popsx].*|(eth|wlan|wwan|bond).*)`, rBPFOnly),
	r("BPFL3IfacePattern", "BPFL3IfacePattern", KindRegexp, "", rBPFOnly),
	r("BPFConnectTimeLoadBalancingEnabled", "BPFConnectTimeLoadBalancingEnabled", KindBool, "", rBPFOnly),
	r("BPFConnectTimeLoadBalancing", "BPFConnectTimeLoadBalancing", OneOf("TCP", "Enabled", "Disabled"), "TCP", rBPFOnly).nz(),
	r("BPFHostNetworkedNATWithoutCTLB", "BPFHostNetworkedNATWithoutCTLB", OneOf("Enabled", "Disabled"), "Enabled", rBPFOnly).nz(),
	r("BPFExternalServiceMode", "BPFExternalServiceMode", OneOf("tunnel", "dsr"), "tunnel", rBPFOnly).nz(),
	r("BPFDSROptoutCIDRs", "BPFDSROptoutCIDRs", KindCIDRList, "", rBPFOnly),
	r("BPFKubeProxyIptablesCleanupEnabled", "BPFKubeProxyIptablesCleanupEnabled", KindBool, "true", rBPFOnly),
	r("BPFKubeProxyMinSyncPeriod", "BPFKubeProxyMinSyncPeriod", KindSeconds, "1", rBPFOnly),
	r("BPFKubeProxyHealthzPort", "BPFKubeProxyHealthzPort", KindInt, "10256", rBPFOnly),
	r("BPFKubeProxyEndpointSlicesEnabled", "BPFKubeProxyEndpointSlicesEnabled", KindBool, "true", rBPFOnly),
	r("BPFExtToServiceConnmark", "BPFExtToServiceConnmark", KindInt, "0", rBPFOnly),
	r("BPFPSNATPorts", "BPFPSNATPorts", KindOpaque, "20000:29999", rBPFOnly),
	r("BPFMapSizeNATFrontend", "BPFMapSizeNATFrontend", KindInt, "65536", rBPFOnly).nz(),
	r("BPFMapSizeNATBackend", "BPFMapSizeNATBackend", KindInt, "262144", rBPFOnly).nz(),
	r("BPFMapSizeNATAffinity", "BPFMapSizeNATAffinity", KindInt, "65536", rBPFOnly).nz(),
	r("BPFMapSizeRoute", "BPFMapSizeRoute", KindInt, "262144", rBPFOnly).nz(),
	r("BPFMapSizeConntrack", "BPFMapSizeConntrack", KindInt, "512000", rBPFOnly).nz(),
	r("BPFMapSizePerCPUConntrack", "BPFMapSizePerCPUConntrack", KindInt, "0", rBPFOnly),
	r("BPFMapSizeConntrackScaling", "BPFMapSizeConntrackScaling", OneOf("Disabled", "DoubleIfFull"), "DoubleIfFull", rBPFOnly).nz(),
	r("BPFMapSizeConntrackCleanupQueue", "BPFMapSizeConntrackCleanupQueue", KindInt, "100000", rBPFOnly).nz(),
	r("BPFMapSizeIPSets", "BPFMapSizeIPSets", KindInt, "1048576", rBPFOnly).nz(),
	r("BPFMapSizeIfState", "BPFMapSizeIfState", KindInt, "1000", rBPFOnly).nz(),
	r("BPFMaglevMaxEndpointsPerService", "BPFMaglevMaxEndpointsPerService", IntRange(1, 3000), "100", rBPFOnly),
	r("BPFMaglevMaxServices", "BPFMaglevMaxServices", IntRange(1, 3000), "100", rBPFOnly),
	r("BPFHostConntrackBypass", "BPFHostConntrackBypass", KindBool, "false", rBPFOnly),
	r("BPFEnforceRPF", "BPFEnforceRPF", OneOf("Disabled", "Strict", "Loose"), "Loose", rBPFOnly).nz(),
	r("BPFPolicyDebugEnabled", "BPFPolicyDebugEnabled", KindBool, "true", rBPFOnly),
	r("BPFForceTrackPacketsFromIfaces", "BPFForceTrackPacketsFromIfaces", KindOpaque, "docker+", rBPFOnly),
	r("BPFDisableGROForIfaces", "BPFDisableGROForIfaces", KindRegexp, "", rBPFOnly),
	r("BPFExcludeCIDRsFromNAT", "BPFExcludeCIDRsFromNAT", KindCIDRList, "", rBPFOnly),
	r("BPFRedirectToPeer", "BPFRedirectToPeer", OneOf("Disabled", "Enabled", "L2Only"), "Enabled", rBPFOnly).nz(),
	r("BPFAttachType", "BPFAttachType", OneOf("Netkit", "TCX", "TC"), "Netkit", rBPFOnly).nz(),
	r("BPFExportBufferSizeMB", "BPFExportBufferSizeMB", KindInt, "1", rBPFOnly).nz(),
	r("BPFProfiling", "BPFProfiling", OneOf("Disabled", "Enabled"), "Disabled", rBPFOnly).nz(),
	r("CgroupV2Path", "CgroupV2Path", KindString, "", rBPFOnly),
}
