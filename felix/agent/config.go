package agent

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/rules"
)

// config is felix's process configuration from Calico's FELIX_*
// environment variables (FelixConfiguration resources are the next
// increment).
type config struct {
	hostname        string
	logLevel        slog.Level
	refreshInterval time.Duration
	ipv6            bool
	healthEnabled   bool
	healthHost      string
	healthPort      int
	metricsEnabled  bool
	metricsHost     string
	metricsPort     int
	ifacePrefixes   []string
	endpointToHost  string
	iptablesBackend string // Auto, NFT or Legacy
	natOutgoingAddr string
	statusPrefix    string // EndpointStatusPathPrefix; "" disables the status files
	mtuFile         string // not Calico's name: where the pods' MTU is written ("" = not)
	netnsPath       string // not Calico's: program this network namespace instead of our own
	// failsafeIn/Out are nil for Calico's defaults.
	failsafeIn, failsafeOut []rules.ProtoPort
}

// parseFailsafe reads Calico's "tcp:22,udp:68" (or "none") port lists.
func parseFailsafe(v string) ([]rules.ProtoPort, error) {
	out := []rules.ProtoPort{}
	if strings.EqualFold(v, "none") {
		return out, nil
	}
	for _, item := range strings.Split(v, ",") {
		proto, port, ok := strings.Cut(strings.TrimSpace(item), ":")
		proto = strings.ToLower(proto)
		n, err := strconv.ParseUint(port, 10, 16)
		if !ok || err != nil || n == 0 || (proto != "tcp" && proto != "udp" && proto != "sctp") {
			return nil, fmt.Errorf("%q is not <tcp|udp|sctp>:<port>", item)
		}
		out = append(out, rules.ProtoPort{Protocol: proto, Port: uint16(n)})
	}
	return out, nil
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
// FELIX_ETCDENDPOINTS, FELIX_ETCDCAFILE, ... as well as DATASTORE_TYPE,
// ETCD_ENDPOINTS, ETCD_CA_CERT_FILE. Felix's older FELIX_ETCDSCHEME +
// FELIX_ETCDADDR give the endpoint when no endpoint list is set.
func datastoreEnv(getenv func(string) string) func(string) string {
	return func(k string) string {
		name := felixEtcdNames[k]
		if name == "" {
			name = "FELIX_" + strings.ReplaceAll(k, "_", "")
		}
		if v := getenv(name); v != "" {
			return v
		}
		if v := getenv(k); v != "" || k != "ETCD_ENDPOINTS" {
			return v
		}
		if addr := getenv("FELIX_ETCDADDR"); addr != "" {
			scheme := getenv("FELIX_ETCDSCHEME")
			if scheme == "" {
				scheme = "http"
			}
			return scheme + "://" + addr
		}
		return ""
	}
}

func loadConfig(getenv func(string) string) (config, error) {
	c := config{
		logLevel: slog.LevelInfo, refreshInterval: 90 * time.Second, ipv6: true,
		healthHost: "localhost", healthPort: 9099, metricsPort: 9091,
	}
	var errs []string
	bad := func(k, v, want string) { errs = append(errs, fmt.Sprintf("%s=%q: %s", k, v, want)) }
	c.hostname = getenv("FELIX_FELIXHOSTNAME")
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
	if v := getenv("FELIX_LOGSEVERITYSCREEN"); v != "" {
		switch strings.ToLower(v) {
		case "debug":
			c.logLevel = slog.LevelDebug
		case "info":
			c.logLevel = slog.LevelInfo
		case "warning", "warn":
			c.logLevel = slog.LevelWarn
		case "error", "fatal", "panic":
			c.logLevel = slog.LevelError
		default:
			bad("FELIX_LOGSEVERITYSCREEN", v, "use Debug, Info, Warning or Error")
		}
	}
	if v := getenv("FELIX_IPTABLESREFRESHINTERVAL"); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 0 {
			bad("FELIX_IPTABLESREFRESHINTERVAL", v, "use seconds, e.g. 90 (0 disables)")
		}
		c.refreshInterval = time.Duration(secs * float64(time.Second))
	}
	boolVar := func(k string, dst *bool) {
		if v := getenv(k); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				bad(k, v, "use true or false")
			}
			*dst = b
		}
	}
	boolVar("FELIX_IPV6SUPPORT", &c.ipv6)
	boolVar("FELIX_HEALTHENABLED", &c.healthEnabled)
	if v := getenv("FELIX_HEALTHHOST"); v != "" {
		c.healthHost = v
	}
	if v := getenv("FELIX_HEALTHPORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			bad("FELIX_HEALTHPORT", v, "use a port 1-65535")
		}
		c.healthPort = p
	}
	boolVar("FELIX_PROMETHEUSMETRICSENABLED", &c.metricsEnabled)
	c.metricsHost = getenv("FELIX_PROMETHEUSMETRICSHOST")
	if v := getenv("FELIX_PROMETHEUSMETRICSPORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			bad("FELIX_PROMETHEUSMETRICSPORT", v, "use a port 1-65535")
		}
		c.metricsPort = p
	}
	if v := getenv("FELIX_INTERFACEPREFIX"); v != "" {
		c.ifacePrefixes = strings.Split(v, ",")
	}
	if v := getenv("FELIX_DEFAULTENDPOINTTOHOSTACTION"); v != "" {
		switch strings.ToUpper(v) {
		case "DROP", "ACCEPT", "RETURN":
			c.endpointToHost = strings.ToUpper(v)
		default:
			bad("FELIX_DEFAULTENDPOINTTOHOSTACTION", v, "use Drop, Accept or Return")
		}
	}
	for _, f := range []struct {
		key string
		dst *[]rules.ProtoPort
	}{{"FELIX_FAILSAFEINBOUNDHOSTPORTS", &c.failsafeIn}, {"FELIX_FAILSAFEOUTBOUNDHOSTPORTS", &c.failsafeOut}} {
		if v := getenv(f.key); v != "" {
			pp, err := parseFailsafe(v)
			if err != nil {
				bad(f.key, v, err.Error())
			}
			*f.dst = pp
		}
	}
	c.iptablesBackend = getenv("FELIX_IPTABLESBACKEND")
	switch strings.ToLower(c.iptablesBackend) {
	case "", "auto", "nft", "legacy":
	default:
		bad("FELIX_IPTABLESBACKEND", c.iptablesBackend, "use Auto, NFT or Legacy")
	}
	if v := getenv("FELIX_NATOUTGOINGADDRESS"); v != "" {
		if _, err := netip.ParseAddr(v); err != nil {
			bad("FELIX_NATOUTGOINGADDRESS", v, "use an IP address")
		}
		c.natOutgoingAddr = v
	}
	c.statusPrefix = "/var/run/calico" // Calico's default
	if v := getenv("FELIX_ENDPOINTSTATUSPATHPREFIX"); v != "" {
		c.statusPrefix = v
		if v == "none" { // not Calico's: an environment cannot say ""
			c.statusPrefix = ""
		}
	}
	c.mtuFile = "/var/lib/calico/mtu" // where Calico's felix writes it
	if v := getenv("TABBY_FELIX_MTU_FILE"); v != "" {
		c.mtuFile = v
		if v == "none" {
			c.mtuFile = ""
		}
	}
	c.netnsPath = getenv("TABBY_FELIX_NETNS")
	if len(errs) > 0 {
		return c, fmt.Errorf("bad configuration: %s", strings.Join(errs, "; "))
	}
	return c, nil
}

// rulesConfig merges the rendering settings with Calico's precedence:
// environment over the node's FelixConfiguration (node.<name>) over the
// global one (default) over Calico's defaults. global and node may be nil.
func rulesConfig(env config, global, node *v3.FelixConfigurationSpec) rules.Config {
	rc := rules.DefaultConfig()
	for _, spec := range []*v3.FelixConfigurationSpec{global, node} {
		if spec == nil {
			continue
		}
		if spec.InterfacePrefix != "" {
			rc.WorkloadIfacePrefixes = strings.Split(spec.InterfacePrefix, ",")
		}
		if spec.DefaultEndpointToHostAction != "" {
			rc.EndpointToHostAction = strings.ToUpper(spec.DefaultEndpointToHostAction)
		}
		if spec.FailsafeInboundHostPorts != nil {
			rc.FailsafeInbound = fromAPIPorts(*spec.FailsafeInboundHostPorts)
		}
		if spec.FailsafeOutboundHostPorts != nil {
			rc.FailsafeOutbound = fromAPIPorts(*spec.FailsafeOutboundHostPorts)
		}
		if spec.NATOutgoingAddress != "" {
			rc.NATOutgoingAddress = spec.NATOutgoingAddress
		}
	}
	if env.natOutgoingAddr != "" {
		rc.NATOutgoingAddress = env.natOutgoingAddr
	}
	if env.ifacePrefixes != nil {
		rc.WorkloadIfacePrefixes = env.ifacePrefixes
	}
	if env.endpointToHost != "" {
		rc.EndpointToHostAction = env.endpointToHost
	}
	if env.failsafeIn != nil {
		rc.FailsafeInbound = env.failsafeIn
	}
	if env.failsafeOut != nil {
		rc.FailsafeOutbound = env.failsafeOut
	}
	return rc
}

func fromAPIPorts(in []v3.ProtoPort) []rules.ProtoPort {
	out := make([]rules.ProtoPort, 0, len(in))
	for _, p := range in {
		out = append(out, rules.ProtoPort{Protocol: strings.ToLower(p.Protocol), Port: p.Port, Net: p.Net})
	}
	return out
}
