package agent

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/tabbynet/tabby/felix/collector"
	felixconfig "github.com/tabbynet/tabby/felix/config"
	"github.com/tabbynet/tabby/felix/rules"
	"github.com/tabbynet/tabby/felix/wireguard"
	"github.com/tabbynet/tabby/typha/discovery"
	"github.com/tabbynet/tabby/typha/tlsconfig"
)

// config is what the wiring needs of felix's resolved settings
// (felix/config), plus Tabby's own TABBY_FELIX_* variables.
type config struct {
	hostname         string
	logScreen        string // Calico severity: TRACE, DEBUG, INFO, WARNING, ERROR, FATAL ("" = off)
	logFile          string
	logFilePath      string // "" = no file
	refreshInterval  time.Duration
	routeRefresh     time.Duration
	watchdogTimeout  time.Duration
	ipv6             bool
	healthEnabled    bool
	healthHost       string
	healthPort       int
	metricsEnabled   bool
	metricsHost      string
	metricsPort      int
	debugHost        string
	debugPort        int // 0: no pprof server
	goMetrics        bool
	processMetrics   bool
	iptablesBackend  string // Auto, NFT or Legacy
	nftablesMode     string // Disabled, Enabled or Auto
	nftRefresh       time.Duration
	chainAppend      bool // ChainInsertMode append
	markAccept       uint32
	markPass         uint32
	statusPrefix     string // EndpointStatusPathPrefix; "" disables the status files
	mtuIfacePattern  string
	ipipMTU          int
	vxlanMTU         int
	vxlanMTUv6       int
	goGC, goMemLimit int
	// calcHangAfter, dataplaneHangAfter: Calico's DebugSimulate*HangAfter
	// (0 = never).
	calcHangAfter, dataplaneHangAfter time.Duration
	goMaxProcs                        int
	mtuFile                           string // not Calico's name: where the pods' MTU is written ("" = not)
	netnsPath                         string // not Calico's: program this network namespace instead of our own
	// flowLogs: FlowLogsLocalReporter is Enabled or FlowLogsGoldmaneServer
	// set (Calico's FlowLogsEnabled): NFLOG verdict marks and the
	// collector. flowLocal: the flow socket too (in flowSocketDir, not
	// Calico's setting: TABBY_FELIX_FLOW_SOCKET_DIR, default Calico's
	// path). goldmane: where flows are also sent, with felix's client
	// certificate (Calico's TyphaCertFile/KeyFile/CAFile).
	flowLogs  bool
	flowLocal bool
	goldmane  goldmaneConfig
	flowFlush time.Duration
	flowDebug bool
	// flowPending: flows carry pending policies (staged policies
	// evaluated, FlowLogsPolicyEvaluationMode Continuous).
	flowPending   bool
	flowSocketDir string
	markDrop      uint32
	// wireguard is the WireGuard configuration per IP version.
	wireguard [2]wireguard.Config
	// typha: follow the datastore through Typha when it names one.
	typha discovery.Settings
}

// fromSettings derives the wiring's configuration. The only error is a
// mark mask with too few bits for felix's two marks.
func fromSettings(s *felixconfig.Settings, getenv func(string) string) (config, error) {
	c := config{
		hostname:           s.String("FelixHostname"),
		logScreen:          s.String("LogSeverityScreen"),
		logFile:            s.String("LogSeverityFile"),
		logFilePath:        s.String("LogFilePath"),
		refreshInterval:    s.Duration("IptablesRefreshInterval"),
		routeRefresh:       s.Duration("RouteRefreshInterval"),
		watchdogTimeout:    s.Duration("DataplaneWatchdogTimeout"),
		ipv6:               s.Bool("Ipv6Support"),
		healthEnabled:      s.Bool("HealthEnabled"),
		healthHost:         s.String("HealthHost"),
		healthPort:         s.Int("HealthPort"),
		metricsEnabled:     s.Bool("PrometheusMetricsEnabled"),
		metricsHost:        s.String("PrometheusMetricsHost"),
		metricsPort:        s.Int("PrometheusMetricsPort"),
		debugHost:          s.String("DebugHost"),
		debugPort:          s.Int("DebugPort"),
		goMetrics:          s.Bool("PrometheusGoMetricsEnabled"),
		processMetrics:     s.Bool("PrometheusProcessMetricsEnabled"),
		iptablesBackend:    s.String("IptablesBackend"),
		nftablesMode:       s.String("NFTablesMode"),
		nftRefresh:         s.Duration("NftablesRefreshInterval"),
		chainAppend:        s.String("ChainInsertMode") == "append",
		statusPrefix:       s.String("EndpointStatusPathPrefix"),
		mtuIfacePattern:    s.Regexp("MTUIfacePattern").Text,
		ipipMTU:            s.Int("IpInIpMtu"),
		vxlanMTU:           s.Int("VXLANMTU"),
		vxlanMTUv6:         s.Int("VXLANMTUV6"),
		goGC:               s.Int("GoGCThreshold"),
		goMemLimit:         s.Int("GoMemoryLimitMB"),
		goMaxProcs:         s.Int("GoMaxProcs"),
		calcHangAfter:      s.Duration("DebugSimulateCalcGraphHangAfter"),
		dataplaneHangAfter: s.Duration("DebugSimulateDataplaneHangAfter"),
		flowLocal:          s.String("FlowLogsLocalReporter") == "Enabled",
		goldmane: goldmaneConfig{server: s.String("FlowLogsGoldmaneServer"), cert: s.String("TyphaCertFile"),
			key: s.String("TyphaKeyFile"), ca: s.String("TyphaCAFile")},
		flowFlush:   s.Duration("FlowLogsFlushInterval"),
		flowDebug:   s.Bool("FlowLogsCollectorDebugTrace"),
		flowPending: s.String("FlowLogsPolicyEvaluationMode") == "Continuous",
		typha: discovery.Settings{Addr: s.String("TyphaAddr"), K8sServiceName: s.String("TyphaK8sServiceName"),
			K8sNamespace: s.String("TyphaK8sNamespace"), ReadTimeout: s.Duration("TyphaReadTimeout"),
			WriteTimeout: s.Duration("TyphaWriteTimeout"), TLS: tlsconfig.Files{CertFile: s.String("TyphaCertFile"),
				KeyFile: s.String("TyphaKeyFile"), CAFile: s.String("TyphaCAFile"), CN: s.String("TyphaCN"), URISAN: s.String("TyphaURISAN")}},
	}
	c.flowLogs = c.flowLocal || c.goldmane.server != ""
	if c.hostname == "" {
		c.hostname = getenv("NODENAME")
	}
	if c.hostname == "" {
		h, err := os.Hostname()
		if err != nil {
			return c, fmt.Errorf("no FELIX_FELIXHOSTNAME and no hostname: %w", err)
		}
		c.hostname = h
	}
	// Flow logs need a third bit: the drop mark a denying rule sets
	// before it is logged (Calico allocates accept, pass, drop in order).
	need := 2
	if c.flowLogs {
		need = 3
	}
	marks := felixconfig.MarkBits(s.Uint32("IptablesMarkMask"), need)
	if len(marks) < need {
		return c, fmt.Errorf("IptablesMarkMask %#x: felix needs at least %d mark bits", s.Uint32("IptablesMarkMask"), need)
	}
	c.markAccept, c.markPass = marks[0], marks[1]
	if c.flowLogs {
		c.markDrop = marks[2]
	}
	c.flowSocketDir = collector.SocketDir
	if v := getenv("TABBY_FELIX_FLOW_SOCKET_DIR"); v != "" {
		c.flowSocketDir = v
	}
	if v := getenv("FELIX_ENDPOINTSTATUSPATHPREFIX"); strings.EqualFold(v, "none") {
		c.statusPrefix = "" // an environment cannot say ""
	}
	c.mtuFile = "/var/lib/calico/mtu" // where Calico's felix writes it
	if v := getenv("TABBY_FELIX_MTU_FILE"); v != "" {
		c.mtuFile = v
		if v == "none" {
			c.mtuFile = ""
		}
	}
	c.netnsPath = getenv("TABBY_FELIX_NETNS")
	c.wireguard = wireguardConfigs(s)
	return c, nil
}

// wireguardConfigs are the WireGuard settings of both IP versions, with
// Calico's firewall mark (the fifth bit of IptablesMarkMask, after
// accept, pass and the two scratch bits: 0x100000 by default) and its
// routing tables (the first two of its default RouteTableRanges).
func wireguardConfigs(s *felixconfig.Settings) [2]wireguard.Config {
	mark := 0
	if bits := felixconfig.MarkBits(s.Uint32("IptablesMarkMask"), 5); len(bits) == 5 {
		mark = int(bits[4])
	}
	hostEnc := s.Bool("WireguardHostEncryptionEnabled")
	keepAlive := s.Duration("WireguardPersistentKeepAlive")
	v4 := wireguard.Config{Enabled: s.Bool("WireguardEnabled"), InterfaceName: s.String("WireguardInterfaceName"),
		ListenPort: s.Int("WireguardListeningPort"), MTU: s.Int("WireguardMTU"), Table: wireguard.TableIndex}
	v6 := wireguard.Config{Enabled: s.Bool("WireguardEnabledV6"), V6: true, InterfaceName: s.String("WireguardInterfaceNameV6"),
		ListenPort: s.Int("WireguardListeningPortV6"), MTU: s.Int("WireguardMTUV6"), Table: wireguard.TableIndexV6}
	out := [2]wireguard.Config{v4, v6}
	for i := range out {
		out[i].FirewallMark, out[i].RulePriority = mark, s.Int("WireguardRoutingRulePriority")
		out[i].KeepAlive, out[i].EncryptHostTraffic = keepAlive, hostEnc
	}
	return out
}

// felixEtcdNames are Calico felix's own names for the etcd settings
// (FELIX_ETCDCAFILE, ...) where they differ from FELIX_ + the common
// variable without underscores.
var felixEtcdNames = map[string]string{
	"ETCD_CA_CERT_FILE": "FELIX_ETCDCAFILE",
	"ETCD_CERT_FILE":    "FELIX_ETCDCERTFILE",
	"ETCD_KEY_FILE":     "FELIX_ETCDKEYFILE",
}

// datastoreEnv lets the datastore settings come as FELIX_DATASTORETYPE,
// FELIX_ETCDENDPOINTS, FELIX_ETCDCAFILE, ... (or the same keys in
// felix.cfg, file) as well as DATASTORE_TYPE, ETCD_ENDPOINTS,
// ETCD_CA_CERT_FILE. Felix's older FELIX_ETCDSCHEME + FELIX_ETCDADDR give
// the endpoint when no endpoint list is set.
func datastoreEnv(getenv func(string) string, file map[string]string) func(string) string {
	felix := func(name string) string {
		if v := getenv(name); v != "" {
			return v
		}
		for k, v := range file {
			if strings.EqualFold("FELIX_"+k, name) {
				return v
			}
		}
		return ""
	}
	return func(k string) string {
		name := felixEtcdNames[k]
		if name == "" {
			name = "FELIX_" + strings.ReplaceAll(k, "_", "")
		}
		if v := felix(name); v != "" {
			return v
		}
		if v := getenv(k); v != "" || k != "ETCD_ENDPOINTS" {
			return v
		}
		if addr := felix("FELIX_ETCDADDR"); addr != "" {
			scheme := felix("FELIX_ETCDSCHEME")
			if scheme == "" {
				scheme = "http"
			}
			return scheme + "://" + addr
		}
		return ""
	}
}

// rulesConfig is the rendering configuration of the resolved settings.
func rulesConfig(c config, s *felixconfig.Settings) rules.Config {
	rc := rules.DefaultConfig()
	rc.MarkAccept, rc.MarkPass = c.markAccept, c.markPass
	rc.FlowLogs, rc.MarkDrop = c.flowLogs, c.markDrop
	rc.WorkloadIfacePrefixes = s.Strings("InterfacePrefix")
	rc.EndpointToHostAction = s.String("DefaultEndpointToHostAction")
	rc.LogPrefix = s.String("LogPrefix")
	if s.IsSet("FailsafeInboundHostPorts") {
		rc.FailsafeInbound = toRulesPorts(s.Ports("FailsafeInboundHostPorts"))
	}
	if s.IsSet("FailsafeOutboundHostPorts") {
		rc.FailsafeOutbound = toRulesPorts(s.Ports("FailsafeOutboundHostPorts"))
	}
	if a := s.Addr("NATOutgoingAddress"); a.IsValid() {
		rc.NATOutgoingAddress = a.String()
	}
	rc.Wireguard = wireguardRules(c.wireguard)
	return rc
}

// wireguardRules are the WireGuard settings the rules need (Calico's
// INPUT/OUTPUT acceptance of the port, host encryption's raw mark).
func wireguardRules(wg [2]wireguard.Config) rules.WireguardRules {
	var r rules.WireguardRules
	for i, c := range wg {
		r.Interfaces = append(r.Interfaces, c.InterfaceName)
		if !c.Enabled {
			continue
		}
		if i == 0 {
			r.Port = c.ListenPort
		} else {
			r.PortV6 = c.ListenPort
		}
		r.HostEncryption = r.HostEncryption || c.EncryptHostTraffic
		r.Mark = uint32(c.FirewallMark)
	}
	return r
}

func toRulesPorts(in []felixconfig.PortSpec) []rules.ProtoPort {
	out := make([]rules.ProtoPort, 0, len(in))
	for _, p := range in {
		out = append(out, rules.ProtoPort{Protocol: p.Protocol, Port: p.Port, Net: p.Net})
	}
	return out
}
