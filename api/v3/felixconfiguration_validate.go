package v3

import (
	"math/bits"
	"regexp"
	"strings"

	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
)

// Validate implements Resource. It applies the rules of Calico's validator
// (libcalico-go validator/v3, including the struct tags and the
// FelixConfigurationSpec struct rule) and of the CRD schema markers: enums,
// port and priority ranges, non-negative durations, interface names and
// filters, regular expressions, CIDRs and addresses, failsafe entries, route
// table ranges. The name may be any valid resource name, as in Calico: Felix
// reads "default" and "node.<nodename>" and ignores others.
func (c *FelixConfiguration) Validate() ErrorList {
	errs := validateMeta(&c.ObjectMeta, false)
	errs.Extend(cfgValidateFelixSpec(Path("spec"), &c.Spec))
	if sel := c.Spec.NodeSelector; sel != nil {
		p := Path("spec").Child("nodeSelector")
		// Calico's CRD rule: any nodeSelector, even "", is refused on
		// the default and the per-node configurations.
		if c.Name == "default" || strings.HasPrefix(c.Name, "node.") {
			errs.Add(p, "nodeSelector must not be set on the 'default' or per-node ('node.*') FelixConfiguration")
		} else {
			polCheckSelector(p, *sel, &errs)
		}
	}
	return errs
}

var (
	// cfgFeatureDetectRe and cfgFeatureGatesRe are Calico's CRD patterns.
	cfgFeatureDetectRe = lazyRegexp(`^([a-zA-Z0-9-_]+=(true|false|),)*([a-zA-Z0-9-_]+=(true|false|))?$`)
	cfgFeatureGatesRe  = lazyRegexp(`^([a-zA-Z0-9-_]+=([^=]+),)*([a-zA-Z0-9-_]+=([^=]+))?$`)
	// cfgIfaceListRe is Felix's interface prefix list ("cali" or "cali,tap").
	cfgIfaceListRe = lazyRegexp(`^[a-zA-Z0-9_-]{1,15}(,[a-zA-Z0-9_-]{1,15})*$`)
	// cfgIfaceExcludeNameRe is a plain (non-regexp) interfaceExclude entry.
	cfgIfaceExcludeNameRe = lazyRegexp(`^[a-zA-Z0-9_.-]{1,15}$`)
	// cfgHostnameRe is Felix's metadataAddr form (IP, host name or "none").
	cfgHostnameRe = lazyRegexp(`^[a-zA-Z0-9_.-]+$`)
	// cfgHTONameRe is the allowed form of a health timeout override name.
	cfgHTONameRe = lazyRegexp(`^[a-zA-Z0-9_ -]+$`)
	// cfgLogActionRateRe is Calico's LogActionRateLimit CRD pattern.
	cfgLogActionRateRe = lazyRegexp(`^[1-9]\d{0,3}/(?:second|minute|hour|day)$`)
	// cfgCTTimeoutRe is the BPFConntrackTimeout CRD pattern.
	cfgCTTimeoutRe = lazyRegexp(`^(([0-9]*(\.[0-9]*)?(ms|s|h|m|us)+)+|Auto)$`)
)

var cfgLogLevels = []string{"Trace", "Debug", "Info", "Warning", "Error", "Fatal"}

const (
	cfgMaxPort = 65535
	// cfgMaxRouteTableIndex is the largest Linux routing table index.
	cfgMaxRouteTableIndex = 0xffffffff
	// cfgMaxRouteTables caps the number of tables routeTableRanges may cover.
	cfgMaxRouteTables = 0xffff
	// cfgMaxOpenstackRegion keeps "openstack-region-<region>" a DNS label.
	cfgMaxOpenstackRegion = k8svalidation.DNS1123LabelMaxLength - len("openstack-region-")
)

// cfgValidateFelixSpec validates a FelixConfigurationSpec rooted at p.
func cfgValidateFelixSpec(p Path, s *FelixConfigurationSpec) ErrorList {
	var errs ErrorList

	// Durations: Calico's CRD pattern admits only unsigned durations.
	cfgCheckDuration(p.Child("dataplaneWatchdogTimeout"), s.DataplaneWatchdogTimeout, &errs)
	cfgCheckDuration(p.Child("routeRefreshInterval"), s.RouteRefreshInterval, &errs)
	cfgCheckDuration(p.Child("interfaceRefreshInterval"), s.InterfaceRefreshInterval, &errs)
	cfgCheckDuration(p.Child("iptablesRefreshInterval"), s.IptablesRefreshInterval, &errs)
	cfgCheckDuration(p.Child("iptablesPostWriteCheckInterval"), s.IptablesPostWriteCheckInterval, &errs)
	cfgCheckDuration(p.Child("iptablesLockTimeout"), s.IptablesLockTimeout, &errs)
	cfgCheckDuration(p.Child("iptablesLockProbeInterval"), s.IptablesLockProbeInterval, &errs)
	cfgCheckDuration(p.Child("ipsetsRefreshInterval"), s.IpsetsRefreshInterval, &errs)
	cfgCheckDuration(p.Child("xdpRefreshInterval"), s.XDPRefreshInterval, &errs)
	cfgCheckDuration(p.Child("netlinkTimeout"), s.NetlinkTimeout, &errs)
	cfgCheckDuration(p.Child("reportingInterval"), s.ReportingInterval, &errs)
	cfgCheckDuration(p.Child("reportingTTL"), s.ReportingTTL, &errs)
	cfgCheckDuration(p.Child("endpointReportingDelay"), s.EndpointReportingDelay, &errs)
	cfgCheckDuration(p.Child("usageReportingInitialDelay"), s.UsageReportingInitialDelay, &errs)
	cfgCheckDuration(p.Child("usageReportingInterval"), s.UsageReportingInterval, &errs)
	cfgCheckDuration(p.Child("debugSimulateCalcGraphHangAfter"), s.DebugSimulateCalcGraphHangAfter, &errs)
	cfgCheckDuration(p.Child("debugSimulateDataplaneHangAfter"), s.DebugSimulateDataplaneHangAfter, &errs)
	cfgCheckDuration(p.Child("debugSimulateDataplaneApplyDelay"), s.DebugSimulateDataplaneApplyDelay, &errs)
	cfgCheckDuration(p.Child("nftablesRefreshInterval"), s.NftablesRefreshInterval, &errs)
	cfgCheckDuration(p.Child("bpfKubeProxyMinSyncPeriod"), s.BPFKubeProxyMinSyncPeriod, &errs)
	cfgCheckDuration(p.Child("flowLogsFlushInterval"), s.FlowLogsFlushInterval, &errs)
	cfgCheckDuration(p.Child("wireguardKeepAlive"), s.WireguardPersistentKeepAlive, &errs)

	// Process and feature switches.
	cfgCheckMatch(p.Child("featureDetectOverride"), s.FeatureDetectOverride, cfgFeatureDetectRe,
		`a comma-separated list of name=true|false| (e.g. "SNATFullyRandom=true,RestoreSupportsLock=")`, &errs)
	cfgCheckMatch(p.Child("featureGates"), s.FeatureGates, cfgFeatureGatesRe,
		`a comma-separated list of name=value`, &errs)
	cfgCheckMin(p.Child("maxIpsetSize"), s.MaxIpsetSize, 0, &errs)
	if s.IptablesBackend != nil {
		cfgCheckEnumFold(p.Child("iptablesBackend"), string(*s.IptablesBackend), &errs, "Legacy", "NFT", "Auto")
	}

	// OpenStack metadata and region.
	cfgCheckMatch(p.Child("metadataAddr"), s.MetadataAddr, cfgHostnameRe, "an IP address, a host name or \"none\"", &errs)
	cfgCheckInt(p.Child("metadataPort"), s.MetadataPort, 0, cfgMaxPort, &errs)
	if r := s.OpenstackRegion; len(r) > cfgMaxOpenstackRegion {
		errs.Addf(p.Child("openstackRegion"), "%q is too long: at most %d characters", r, cfgMaxOpenstackRegion)
	} else if r != "" && len(k8svalidation.IsDNS1123Label(r)) > 0 {
		errs.Addf(p.Child("openstackRegion"), "%q must be a valid DNS label (lower-case letters, digits and '-')", r)
	}

	// Interfaces.
	cfgCheckMatch(p.Child("interfacePrefix"), s.InterfacePrefix, cfgIfaceListRe,
		"a comma-separated list of interface name prefixes (letters, digits, '_' and '-', at most 15 each)", &errs)
	cfgCheckInterfaceExclude(p.Child("interfaceExclude"), s.InterfaceExclude, &errs)
	cfgCheckMatch(p.Child("iptablesNATOutgoingInterfaceFilter"), s.IptablesNATOutgoingInterfaceFilter, cfgIfaceFilterRe,
		"an iptables interface match such as \"eth+\" (at most 15 characters)", &errs)

	// Chains, actions and marks.
	cfgCheckEnumFold(p.Child("chainInsertMode"), s.ChainInsertMode, &errs, "Insert", "Append")
	cfgCheckEnumFold(p.Child("defaultEndpointToHostAction"), s.DefaultEndpointToHostAction, &errs, "Drop", "Accept", "Return")
	cfgCheckEnumFold(p.Child("iptablesFilterAllowAction"), s.IptablesFilterAllowAction, &errs, "Accept", "Return")
	cfgCheckEnumFold(p.Child("iptablesMangleAllowAction"), s.IptablesMangleAllowAction, &errs, "Accept", "Return")
	cfgCheckEnumFold(p.Child("iptablesFilterDenyAction"), s.IptablesFilterDenyAction, &errs, "Drop", "Reject")
	cfgCheckEnumFold(p.Child("nftablesFilterAllowAction"), s.NftablesFilterAllowAction, &errs, "Accept", "Return")
	cfgCheckEnumFold(p.Child("nftablesMangleAllowAction"), s.NftablesMangleAllowAction, &errs, "Accept", "Return")
	cfgCheckEnumFold(p.Child("nftablesFilterDenyAction"), s.NftablesFilterDenyAction, &errs, "Drop", "Reject")
	cfgCheckMarkMask(p.Child("iptablesMarkMask"), s.IptablesMarkMask, &errs)
	cfgCheckMarkMask(p.Child("nftablesMarkMask"), s.NftablesMarkMask, &errs)
	if s.NFTablesMode != nil {
		cfgCheckEnum(p.Child("nftablesMode"), string(*s.NFTablesMode), &errs, "Disabled", "Enabled", "Auto")
	}

	// Logging.
	cfgCheckEnumFold(p.Child("logSeverityFile"), s.LogSeverityFile, &errs, cfgLogLevels...)
	cfgCheckEnumFold(p.Child("logSeverityScreen"), s.LogSeverityScreen, &errs, cfgLogLevels...)
	cfgCheckEnumFold(p.Child("logSeveritySys"), s.LogSeveritySys, &errs, cfgLogLevels...)
	cfgCheckRegexp(p.Child("logDebugFilenameRegex"), s.LogDebugFilenameRegex, &errs)

	// Encapsulation.
	cfgCheckInt(p.Child("ipipMTU"), s.IPIPMTU, 0, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("vxlanMTU"), s.VXLANMTU, 0, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("vxlanMTUV6"), s.VXLANMTUV6, 0, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("vxlanPort"), s.VXLANPort, 0, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("vxlanVNI"), s.VXLANVNI, 0, 1<<24-1, &errs)

	// Health, metrics and debug servers.
	if s.HealthHost != nil {
		cfgCheckMatch(p.Child("healthHost"), *s.HealthHost, cfgHostAddrRe, "a host name or IP address", &errs)
	}
	cfgCheckInt(p.Child("healthPort"), s.HealthPort, 0, cfgMaxPort, &errs)
	cfgCheckHealthTimeoutOverrides(p.Child("healthTimeoutOverrides"), s.HealthTimeoutOverrides, &errs)
	cfgCheckMatch(p.Child("prometheusMetricsHost"), s.PrometheusMetricsHost, cfgHostAddrRe, "a host name or IP address", &errs)
	cfgCheckInt(p.Child("prometheusMetricsPort"), s.PrometheusMetricsPort, 0, cfgMaxPort, &errs)
	if s.DebugHost != nil {
		cfgCheckMatch(p.Child("debugHost"), *s.DebugHost, cfgHostAddrRe, "a host name or IP address", &errs)
	}
	cfgCheckInt(p.Child("debugPort"), s.DebugPort, 0, cfgMaxPort, &errs)

	// Failsafe ports and node ports.
	cfgCheckProtoPorts(p.Child("failsafeInboundHostPorts"), s.FailsafeInboundHostPorts, &errs)
	cfgCheckProtoPorts(p.Child("failsafeOutboundHostPorts"), s.FailsafeOutboundHostPorts, &errs)
	if s.KubeNodePortRanges != nil {
		rp := p.Child("kubeNodePortRanges")
		if n := len(*s.KubeNodePortRanges); n > 7 {
			errs.Addf(rp, "has %d ranges; at most 7 are allowed (iptables multiport limit)", n)
		}
		for i := range *s.KubeNodePortRanges {
			cfgCheckPortRange(rp.Index(i), &(*s.KubeNodePortRanges)[i], &errs)
		}
	}

	// NAT and routes.
	cfgCheckPortRange(p.Child("natPortRange"), s.NATPortRange, &errs)
	cfgCheckIPVersion(p.Child("natOutgoingAddress"), s.NATOutgoingAddress, 4, &errs)
	if s.NATOutgoingExclusions != nil {
		cfgCheckEnum(p.Child("natOutgoingExclusions"), string(*s.NATOutgoingExclusions), &errs, "IPPoolsOnly", "IPPoolsAndHostIPs")
	}
	cfgCheckIPVersion(p.Child("deviceRouteSourceAddress"), s.DeviceRouteSourceAddress, 4, &errs)
	cfgCheckIPVersion(p.Child("deviceRouteSourceAddressIPv6"), s.DeviceRouteSourceAddressIPv6, 6, &errs)
	cfgCheckInt(p.Child("deviceRouteProtocol"), s.DeviceRouteProtocol, 0, 255, &errs)
	if s.ProgramClusterRoutes != nil {
		cfgCheckEnum(p.Child("programClusterRoutes"), *s.ProgramClusterRoutes, &errs, "Enabled", "Disabled")
	}
	cfgCheckEnum(p.Child("ipForwarding"), s.IPForwarding, &errs, "Enabled", "Disabled")
	if s.ExternalNodesCIDRList != nil {
		for i, c := range *s.ExternalNodesCIDRList {
			ep := p.Child("externalNodesList").Index(i)
			if v := validateCIDR(ep, c, &errs); v == 6 {
				errs.Addf(ep, "%q is an IPv6 CIDR; only IPv4 CIDRs are supported", c)
			}
		}
	}
	cfgCheckEnumFold(p.Child("routeSource"), s.RouteSource, &errs, "WorkloadIPs", "CalicoIPAM")
	cfgCheckRouteTables(p, s, &errs)
	for _, rp := range []struct {
		name string
		v    *int
	}{
		{"ipv4NormalRoutePriority", s.IPv4NormalRoutePriority},
		{"ipv4ElevatedRoutePriority", s.IPv4ElevatedRoutePriority},
		{"ipv6NormalRoutePriority", s.IPv6NormalRoutePriority},
		{"ipv6ElevatedRoutePriority", s.IPv6ElevatedRoutePriority},
	} {
		cfgCheckInt(p.Child(rp.name), rp.v, 1, 2147483646, &errs)
	}

	// BPF dataplane.
	if s.BPFJITHardening != nil {
		cfgCheckEnum(p.Child("bpfJITHardening"), string(*s.BPFJITHardening), &errs, "Auto", "Strict")
	}
	cfgCheckEnumFold(p.Child("bpfLogLevel"), s.BPFLogLevel, &errs, "Off", "Info", "Debug")
	cfgCheckEnum(p.Child("bpfConntrackLogLevel"), s.BPFConntrackLogLevel, &errs, "Off", "Debug")
	if s.BPFConntrackCleanupMode != nil {
		cfgCheckEnum(p.Child("bpfConntrackMode"), string(*s.BPFConntrackCleanupMode), &errs, "Auto", "Userspace", "BPFProgram")
	}
	cfgCheckConntrackTimeouts(p.Child("bpfConntrackTimeouts"), s.BPFConntrackTimeouts, &errs)
	if s.BPFLogFilters != nil {
		for k := range *s.BPFLogFilters {
			if !cfgIfaceNameRe().MatchString(k) {
				errs.Addf(p.Child("bpfLogFilters").Key(k),
					"%q is not an interface name (or all, weps, heps)", k)
			}
		}
	}
	cfgCheckEnum(p.Child("bpfCTLBLogFilter"), s.BPFCTLBLogFilter, &errs, "all")
	cfgCheckRegexp(p.Child("bpfDataIfacePattern"), s.BPFDataIfacePattern, &errs)
	cfgCheckRegexp(p.Child("bpfL3IfacePattern"), s.BPFL3IfacePattern, &errs)
	if s.BPFConnectTimeLoadBalancing != nil {
		cfgCheckEnum(p.Child("bpfConnectTimeLoadBalancing"), string(*s.BPFConnectTimeLoadBalancing), &errs, "TCP", "Enabled", "Disabled")
	}
	if s.BPFHostNetworkedNATWithoutCTLB != nil {
		cfgCheckEnum(p.Child("bpfHostNetworkedNATWithoutCTLB"), string(*s.BPFHostNetworkedNATWithoutCTLB), &errs, "Enabled", "Disabled")
	}
	cfgCheckEnumFold(p.Child("bpfExternalServiceMode"), s.BPFExternalServiceMode, &errs, "Tunnel", "DSR")
	cfgCheckCIDRs(p.Child("bpfDSROptoutCIDRs"), s.BPFDSROptoutCIDRs, &errs)
	cfgCheckInt(p.Child("bpfExtToServiceConnmark"), s.BPFExtToServiceConnmark, 0, 4294967295, &errs)
	cfgCheckInt(p.Child("bpfKubeProxyHealthzPort"), s.BPFKubeProxyHealthzPort, 0, cfgMaxPort, &errs)
	cfgCheckPortRange(p.Child("bpfPSNATPorts"), s.BPFPSNATPorts, &errs)
	for _, m := range []struct {
		name string
		v    *int
	}{
		{"bpfMapSizeNATFrontend", s.BPFMapSizeNATFrontend},
		{"bpfMapSizeNATBackend", s.BPFMapSizeNATBackend},
		{"bpfMapSizeNATAffinity", s.BPFMapSizeNATAffinity},
		{"bpfMapSizeRoute", s.BPFMapSizeRoute},
		{"bpfMapSizeConntrack", s.BPFMapSizeConntrack},
		{"bpfMapSizePerCpuConntrack", s.BPFMapSizePerCPUConntrack},
		{"bpfMapSizeIPSets", s.BPFMapSizeIPSets},
		{"bpfMapSizeIfState", s.BPFMapSizeIfState},
	} {
		cfgCheckMin(p.Child(m.name), m.v, 0, &errs)
	}
	cfgCheckEnumFold(p.Child("bpfMapSizeConntrackScaling"), s.BPFMapSizeConntrackScaling, &errs, "Disabled", "DoubleIfFull")
	cfgCheckMin(p.Child("bpfMapSizeConntrackCleanupQueue"), s.BPFMapSizeConntrackCleanupQueue, 1, &errs)
	cfgCheckInt(p.Child("bpfMaglevMaxEndpointsPerService"), s.BPFMaglevMaxEndpointsPerService, 1, 3000, &errs)
	cfgCheckInt(p.Child("bpfMaglevMaxServices"), s.BPFMaglevMaxServices, 1, 3000, &errs)
	cfgCheckEnumFold(p.Child("bpfEnforceRPF"), s.BPFEnforceRPF, &errs, "Disabled", "Strict", "Loose")
	if s.BPFForceTrackPacketsFromIfaces != nil {
		for i, f := range *s.BPFForceTrackPacketsFromIfaces {
			if !cfgIfaceFilterRe().MatchString(f) {
				errs.Addf(p.Child("bpfForceTrackPacketsFromIfaces").Index(i),
					"%q is not an iptables interface match such as \"docker+\" (at most 15 characters)", f)
			}
		}
	}
	cfgCheckRegexp(p.Child("bpfDisableGROForIfaces"), s.BPFDisableGROForIfaces, &errs)
	cfgCheckCIDRs(p.Child("bpfExcludeCIDRsFromNAT"), s.BPFExcludeCIDRsFromNAT, &errs)
	cfgCheckMin(p.Child("bpfExportBufferSizeMB"), s.BPFExportBufferSizeMB, 1, &errs)
	cfgCheckEnum(p.Child("bpfRedirectToPeer"), s.BPFRedirectToPeer, &errs, "Enabled", "Disabled", "L2Only")
	if s.BPFAttachType != nil {
		cfgCheckEnum(p.Child("bpfAttachType"), string(*s.BPFAttachType), &errs, "TC", "TCX")
	}
	cfgCheckEnum(p.Child("bpfProfiling"), s.BPFProfiling, &errs, "Enabled", "Disabled")

	// Istio ambient mode.
	if s.IstioAmbientMode != nil {
		cfgCheckEnum(p.Child("istioAmbientMode"), string(*s.IstioAmbientMode), &errs, "Enabled", "Disabled")
	}
	if s.IstioDSCPMark != nil {
		polCheckDSCP(p.Child("istioDSCPMark"), *s.IstioDSCPMark, &errs)
	}

	// Log action rate limit and TLS metrics.
	if r := s.LogActionRateLimit; r != nil && !cfgLogActionRateRe().MatchString(*r) {
		errs.Addf(p.Child("logActionRateLimit"), "%q is not N/unit with N 1-9999 and unit second, minute, hour or day", *r)
	}
	cfgCheckInt(p.Child("logActionRateLimitBurst"), s.LogActionRateLimitBurst, 0, 9999, &errs)
	if a := s.PrometheusMetricsClientAuth; a != nil {
		cfgCheckEnum(p.Child("prometheusMetricsClientAuth"), string(*a), &errs, string(RequireAndVerifyClientCert),
			string(RequireAnyClientCert), string(VerifyClientCertIfGiven), string(NoClientCert))
	}
	cfgCheckDuration(p.Child("liveMigrationRouteConvergenceTime"), s.LiveMigrationRouteConvergenceTime, &errs)

	// Flow logs.
	if s.FlowLogsPolicyEvaluationMode != nil {
		cfgCheckEnum(p.Child("flowLogsPolicyEvaluationMode"), string(*s.FlowLogsPolicyEvaluationMode), &errs, "None", "Continuous")
	}
	if s.FlowLogsLocalReporter != nil {
		cfgCheckEnum(p.Child("flowLogsLocalReporter"), *s.FlowLogsLocalReporter, &errs, "Disabled", "Enabled")
	}

	// WireGuard.
	cfgCheckInt(p.Child("wireguardListeningPort"), s.WireguardListeningPort, 1, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("wireguardListeningPortV6"), s.WireguardListeningPortV6, 1, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("wireguardRoutingRulePriority"), s.WireguardRoutingRulePriority, 1, 32765, &errs)
	cfgCheckWireguardIface(p.Child("wireguardInterfaceName"), s.WireguardInterfaceName, &errs)
	cfgCheckWireguardIface(p.Child("wireguardInterfaceNameV6"), s.WireguardInterfaceNameV6, &errs)
	cfgCheckInt(p.Child("wireguardMTU"), s.WireguardMTU, 0, cfgMaxPort, &errs)
	cfgCheckInt(p.Child("wireguardMTUV6"), s.WireguardMTUV6, 0, cfgMaxPort, &errs)

	// Miscellaneous.
	if s.AWSSrcDstCheck != nil {
		cfgCheckEnum(p.Child("awsSrcDstCheck"), string(*s.AWSSrcDstCheck), &errs, "DoNothing", "Enable", "Disable")
	}
	cfgCheckEnumFold(p.Child("serviceLoopPrevention"), s.ServiceLoopPrevention, &errs, "Drop", "Reject", "Disabled")
	cfgCheckEnumFold(p.Child("workloadSourceSpoofing"), s.WorkloadSourceSpoofing, &errs, "Disabled", "Any")
	cfgCheckRegexp(p.Child("mtuIfacePattern"), s.MTUIfacePattern, &errs)
	if s.FloatingIPs != nil {
		cfgCheckEnum(p.Child("floatingIPs"), string(*s.FloatingIPs), &errs, "Enabled", "Disabled")
	}
	if s.WindowsManageFirewallRules != nil {
		cfgCheckEnum(p.Child("windowsManageFirewallRules"), string(*s.WindowsManageFirewallRules), &errs, "Enabled", "Disabled")
	}
	cfgCheckMin(p.Child("goGCThreshold"), s.GoGCThreshold, -1, &errs)
	cfgCheckMin(p.Child("goMemoryLimitMB"), s.GoMemoryLimitMB, -1, &errs)
	cfgCheckMin(p.Child("goMaxProcs"), s.GoMaxProcs, -1, &errs)
	return errs
}

// cfgCheckMarkMask requires a mask with enough bits for Felix's marks:
// Calico documents "a 32 bit hexadecimal number with at least 8 bits set".
func cfgCheckMarkMask(p Path, m *uint32, errs *ErrorList) {
	if m == nil {
		return
	}
	if n := bits.OnesCount32(*m); n < 8 {
		errs.Addf(p, "0x%08x has %d bits set; a mark mask needs at least 8", *m, n)
	}
}

// cfgCheckInterfaceExclude checks a comma-separated list whose entries are
// interface names or /regexps/.
func cfgCheckInterfaceExclude(p Path, s string, errs *ErrorList) {
	if s == "" {
		return
	}
	for _, e := range strings.Split(s, ",") {
		if len(e) >= 2 && strings.HasPrefix(e, "/") && strings.HasSuffix(e, "/") {
			if strings.ContainsAny(e, " \t") {
				errs.Addf(p, "entry %q must not contain spaces", e)
			} else if _, err := regexp.Compile(e[1 : len(e)-1]); err != nil {
				errs.Addf(p, "entry %q is not a valid regular expression: %v", e, err)
			}
			continue
		}
		if !cfgIfaceExcludeNameRe().MatchString(e) {
			errs.Addf(p, "entry %q is neither an interface name (at most 15 of letters, digits, '.', '_', '-') nor a /regexp/", e)
		}
	}
}

// cfgCheckWireguardIface checks a WireGuard device name (Calico's
// "interface" rule, which also admits "*").
func cfgCheckWireguardIface(p Path, s string, errs *ErrorList) {
	if s != "" && s != "*" && !cfgIfaceNameRe().MatchString(s) {
		errs.Addf(p, "%q is not a valid interface name (at most 15 of letters, digits, '.', '_', '-')", s)
	}
}

// cfgCheckIPVersion checks that s, if set, is a plain IP of the given version.
func cfgCheckIPVersion(p Path, s string, version int, errs *ErrorList) {
	if s == "" {
		return
	}
	var sub ErrorList
	v := validateIP(p, s, &sub)
	switch {
	case v == 0:
		errs.Extend(sub)
	case v != version:
		errs.Addf(p, "%q is not an IPv%d address", s, version)
	}
}

// cfgCheckHealthTimeoutOverrides applies Calico's HealthTimeoutOverride
// rule: a name of letters, digits, '_', '-' and spaces, and a timeout that
// is not negative.
func cfgCheckHealthTimeoutOverrides(p Path, hs []HealthTimeoutOverride, errs *ErrorList) {
	for i, h := range hs {
		hp := p.Index(i)
		if !cfgHTONameRe().MatchString(h.Name) {
			errs.Addf(hp.Child("name"), "%q is not a component name (letters, digits, '_', '-' and spaces)", h.Name)
		}
		cfgCheckDuration(hp.Child("timeout"), &h.Timeout, errs)
	}
}

// cfgCheckProtoPorts checks failsafe entries. Calico's validator wants the
// protocol as TCP, UDP or SCTP; its docs, its CRD and Felix itself use and
// accept lower case, and an empty protocol means TCP, so any case is
// accepted here. The net, if set, must be a CIDR or IP.
func cfgCheckProtoPorts(p Path, list *[]ProtoPort, errs *ErrorList) {
	if list == nil {
		return
	}
	for i, pp := range *list {
		ep := p.Index(i)
		cfgCheckEnumFold(ep.Child("protocol"), pp.Protocol, errs, "TCP", "UDP", "SCTP")
		if pp.Net != "" {
			validateCIDR(ep.Child("net"), pp.Net, errs)
		}
	}
}

// cfgCheckRouteTables applies Calico's rules to routeTableRange (1-250,
// min <= max), routeTableRanges (min >= 1, min <= max, max within the
// kernel's index space, at most 65535 tables in all) and forbids setting both.
func cfgCheckRouteTables(p Path, s *FelixConfigurationSpec, errs *ErrorList) {
	if r := s.RouteTableRange; r != nil {
		if r.Min < 1 || r.Max < r.Min || r.Max > 250 {
			errs.Addf(p.Child("routeTableRange"), "%d-%d must be a range of route table indices within 1-250", r.Min, r.Max)
		}
		if s.RouteTableRanges != nil {
			errs.Add(p.Child("routeTableRange"), "cannot be set when routeTableRanges is also set (routeTableRanges replaces it)")
		}
	}
	if s.RouteTableRanges == nil {
		return
	}
	rp := p.Child("routeTableRanges")
	for i, r := range *s.RouteTableRanges {
		ip := rp.Index(i)
		if r.Min < 1 {
			errs.Addf(ip.Child("min"), "%d is invalid: route table indices start at 1", r.Min)
		}
		if r.Min > r.Max {
			errs.Addf(ip, "min %d is greater than max %d", r.Min, r.Max)
		}
		if int64(r.Max) > cfgMaxRouteTableIndex {
			errs.Addf(ip.Child("max"), "%d is above the largest route table index %d", r.Max, int64(cfgMaxRouteTableIndex))
		}
	}
	if n := s.RouteTableRanges.NumDesignatedTables(); n > cfgMaxRouteTables {
		errs.Addf(rp, "cover %d tables; at most %d are allowed", n, cfgMaxRouteTables)
	}
}

// cfgCheckConntrackTimeouts checks each BPF conntrack timer against its
// CRD pattern (a duration such as "30s" or "1h", or "Auto").
func cfgCheckConntrackTimeouts(p Path, t *BPFConntrackTimeouts, errs *ErrorList) {
	if t == nil {
		return
	}
	for _, f := range []struct {
		name string
		v    *BPFConntrackTimeout
	}{
		{"creationGracePeriod", t.CreationGracePeriod},
		{"tcpSynSent", t.TCPSynSent},
		{"tcpEstablished", t.TCPEstablished},
		{"tcpFinsSeen", t.TCPFinsSeen},
		{"tcpResetSeen", t.TCPResetSeen},
		{"udpTimeout", t.UDPTimeout},
		{"genericTimeout", t.GenericTimeout},
		{"icmpTimeout", t.ICMPTimeout},
	} {
		if f.v != nil && !cfgCTTimeoutRe().MatchString(string(*f.v)) {
			errs.Addf(p.Child(f.name), "%q is not a duration (e.g. \"30s\", \"1h\") or Auto", string(*f.v))
		}
	}
}
