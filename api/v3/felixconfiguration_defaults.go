package v3

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// FelixDefaults returns Felix's built-in value for each setting Tabby's
// Felix acts on: the value in force when neither the node's
// FelixConfiguration ("node.<name>"), nor the global one ("default"), nor the
// local environment sets it. These are never written into stored objects
// (Default leaves them unset, as Calico does); Felix merges them in at run
// time.
//
// Values follow Calico's felix/config/config_params.go (2026 main branch),
// which is where Felix's defaults live; where that differs from the
// "[Default: ...]" text in Calico's API comments, config_params.go wins
// (iptablesRefreshInterval 180s, iptablesPostWriteCheckInterval 5s,
// iptablesMarkMask 0xffff0000, MTUs 0 = auto-detect, nftablesMode Auto,
// bpfRedirectToPeer Enabled). routeTableRanges is Felix's effective default
// 1-250 (libcalico-go clientv3 DefaultFelixRouteTableRangeMin/Max).
// Settings with no default (empty strings, unset switches such as
// ipipEnabled, which Felix derives from the IP pools) are left unset.
//
// Each call returns a fresh value; callers may modify it.
func FelixDefaults() FelixConfigurationSpec {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	return FelixConfigurationSpec{
		UseInternalDataplaneDriver:     new(true),
		DataplaneWatchdogTimeout:       d(90 * time.Second),
		IPv6Support:                    new(true),
		RouteRefreshInterval:           d(90 * time.Second),
		InterfaceRefreshInterval:       d(90 * time.Second),
		IptablesRefreshInterval:        d(180 * time.Second),
		IptablesPostWriteCheckInterval: d(5 * time.Second),
		IptablesLockFilePath:           "/run/xtables.lock",
		IptablesLockTimeout:            d(0),
		IptablesLockProbeInterval:      d(50 * time.Millisecond),
		IpsetsRefreshInterval:          d(90 * time.Second),
		MaxIpsetSize:                   new(1048576),
		IptablesBackend:                new(IptablesBackendAuto),
		XDPRefreshInterval:             d(90 * time.Second),
		NetlinkTimeout:                 d(10 * time.Second),
		MetadataAddr:                   "127.0.0.1",
		MetadataPort:                   new(8775),
		InterfacePrefix:                "cali",
		InterfaceExclude:               "kube-ipvs0",
		ChainInsertMode:                "Insert",
		DefaultEndpointToHostAction:    "Drop",
		IptablesFilterAllowAction:      "Accept",
		IptablesMangleAllowAction:      "Accept",
		IptablesFilterDenyAction:       "Drop",
		LogPrefix:                      "calico-packet",
		LogFilePath:                    "/var/log/calico/felix.log",
		LogSeverityFile:                "Info",
		LogSeverityScreen:              "Info",
		LogSeveritySys:                 "Info",
		IPIPMTU:                        new(0),
		VXLANMTU:                       new(0),
		VXLANMTUV6:                     new(0),
		VXLANPort:                      new(4789),
		VXLANVNI:                       new(4096),
		AllowVXLANPacketsFromWorkloads: new(false),
		AllowIPIPPacketsFromWorkloads:  new(false),
		ReportingInterval:              d(30 * time.Second),
		ReportingTTL:                   d(90 * time.Second),
		EndpointReportingEnabled:       new(false),
		EndpointReportingDelay:         d(time.Second),
		EndpointStatusPathPrefix:       "/var/run/calico",
		IptablesMarkMask:               new(uint32(0xffff0000)),
		DisableConntrackInvalidCheck:   new(false),
		HealthEnabled:                  new(false),
		HealthHost:                     new("localhost"),
		HealthPort:                     new(9099),

		PrometheusMetricsEnabled:          new(false),
		PrometheusMetricsPort:             new(9091),
		PrometheusGoMetricsEnabled:        new(true),
		PrometheusProcessMetricsEnabled:   new(true),
		PrometheusWireGuardMetricsEnabled: new(true),

		// Inbound: SSH, DHCP client, BGP, etcd, Typha, Kubernetes API.
		FailsafeInboundHostPorts: &[]ProtoPort{
			{Protocol: "tcp", Port: 22}, {Protocol: "udp", Port: 68}, {Protocol: "tcp", Port: 179},
			{Protocol: "tcp", Port: 2379}, {Protocol: "tcp", Port: 2380}, {Protocol: "tcp", Port: 5473},
			{Protocol: "tcp", Port: 6443}, {Protocol: "tcp", Port: 6666}, {Protocol: "tcp", Port: 6667},
		},
		// Outbound: DNS, DHCP server, BGP, etcd, Typha, Kubernetes API.
		FailsafeOutboundHostPorts: &[]ProtoPort{
			{Protocol: "udp", Port: 53}, {Protocol: "udp", Port: 67}, {Protocol: "tcp", Port: 179},
			{Protocol: "tcp", Port: 2379}, {Protocol: "tcp", Port: 2380}, {Protocol: "tcp", Port: 5473},
			{Protocol: "tcp", Port: 6443}, {Protocol: "tcp", Port: 6666}, {Protocol: "tcp", Port: 6667},
		},
		KubeNodePortRanges: &[]numorstring.Port{{MinPort: 30000, MaxPort: 32767}},

		UsageReportingEnabled:      new(true),
		UsageReportingInitialDelay: d(300 * time.Second),
		UsageReportingInterval:     d(86400 * time.Second),
		NATOutgoingExclusions:      new(NATOutgoingExclusionsIPPoolsOnly),
		DeviceRouteProtocol:        new(3),
		RemoveExternalRoutes:       new(true),
		ProgramClusterRoutes:       new("Disabled"),
		IPForwarding:               "Enabled",
		DebugDisableLogDropping:    new(false),
		DebugHost:                  new("localhost"),
		SidecarAccelerationEnabled: new(false),
		XDPEnabled:                 new(true),
		GenericXDPEnabled:          new(false),

		NFTablesMode:              new(NFTablesModeAuto),
		NftablesRefreshInterval:   d(180 * time.Second),
		NftablesFilterAllowAction: "Accept",
		NftablesMangleAllowAction: "Accept",
		NftablesFilterDenyAction:  "Drop",
		NftablesMarkMask:          new(uint32(0xffff0000)),

		BPFEnabled:                         new(false),
		BPFDisableUnprivileged:             new(true),
		BPFJITHardening:                    new(BPFJITHardeningAuto),
		BPFLogLevel:                        "Off",
		BPFConntrackLogLevel:               "Off",
		BPFConntrackCleanupMode:            new(BPFConntrackModeAuto),
		BPFDataIfacePattern:                `^((en|wl|ww|sl|ib)[Popsx].*|(eth|wlan|wwan|bond).*)`,
		BPFConnectTimeLoadBalancing:        new(BPFConnectTimeLBTCP),
		BPFHostNetworkedNATWithoutCTLB:     new(BPFHostNetworkedNATEnabled),
		BPFExternalServiceMode:             "Tunnel",
		BPFExtToServiceConnmark:            new(0),
		BPFKubeProxyIptablesCleanupEnabled: new(true),
		BPFKubeProxyMinSyncPeriod:          d(time.Second),
		BPFKubeProxyHealthzPort:            new(10256),
		BPFPSNATPorts:                      &numorstring.Port{MinPort: 20000, MaxPort: 29999},
		BPFMapSizeNATFrontend:              new(65536),
		BPFMapSizeNATBackend:               new(262144),
		BPFMapSizeNATAffinity:              new(65536),
		BPFMapSizeRoute:                    new(262144),
		BPFMapSizeConntrack:                new(512000),
		BPFMapSizePerCPUConntrack:          new(0),
		BPFMapSizeConntrackScaling:         "DoubleIfFull",
		BPFMapSizeConntrackCleanupQueue:    new(100000),
		BPFMapSizeIPSets:                   new(1048576),
		BPFMapSizeIfState:                  new(1000),
		BPFMaglevMaxEndpointsPerService:    new(100),
		BPFMaglevMaxServices:               new(100),
		BPFHostConntrackBypass:             new(false),
		BPFEnforceRPF:                      "Loose",
		BPFPolicyDebugEnabled:              new(true),
		BPFForceTrackPacketsFromIfaces:     &[]string{"docker+"},
		BPFExportBufferSizeMB:              new(1),
		BPFRedirectToPeer:                  "Enabled",
		BPFAttachType:                      new(BPFAttachOptionTCX),
		BPFProfiling:                       "Disabled",

		FlowLogsFlushInterval:        d(300 * time.Second),
		FlowLogsCollectorDebugTrace:  new(false),
		FlowLogsLocalReporter:        new("Disabled"),
		FlowLogsPolicyEvaluationMode: new(FlowLogsPolicyEvaluationModeContinuous),

		RouteSource:               "CalicoIPAM",
		RouteTableRanges:          &RouteTableRanges{{Min: 1, Max: 250}},
		RouteSyncDisabled:         new(false),
		IPv4NormalRoutePriority:   new(1024),
		IPv4ElevatedRoutePriority: new(512),
		IPv6NormalRoutePriority:   new(1024),
		IPv6ElevatedRoutePriority: new(512),

		WireguardEnabled:               new(false),
		WireguardEnabledV6:             new(false),
		WireguardThreadingEnabled:      new(false),
		WireguardListeningPort:         new(51820),
		WireguardListeningPortV6:       new(51821),
		WireguardRoutingRulePriority:   new(99),
		WireguardInterfaceName:         "wireguard.cali",
		WireguardInterfaceNameV6:       "wg-v6.cali",
		WireguardMTU:                   new(0),
		WireguardMTUV6:                 new(0),
		WireguardHostEncryptionEnabled: new(false),
		WireguardPersistentKeepAlive:   d(0),

		AWSSrcDstCheck:             new(AWSSrcDstCheckOptionDoNothing),
		ServiceLoopPrevention:      "Drop",
		WorkloadSourceSpoofing:     "Disabled",
		MTUIfacePattern:            `^((en|wl|ww|sl|ib)[Pcopsvx].*|(eth|wlan|wwan).*)`,
		FloatingIPs:                new(FloatingIPsDisabled),
		WindowsManageFirewallRules: new(WindowsManageFirewallRulesDisabled),
		GoGCThreshold:              new(40),
		GoMemoryLimitMB:            new(-1),
		GoMaxProcs:                 new(-1),
		RequireMTUFile:             new(false),
	}
}
