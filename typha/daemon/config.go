package daemon

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/tabbynet/tabby/typha/syncproto"
	"github.com/tabbynet/tabby/typha/tlsconfig"
)

// Config is Typha's configuration: Calico's TYPHA_* parameters that Tabby
// honours (FromEnv).
type Config struct {
	DatastoreType string // TYPHA_DATASTORETYPE (Calico's default etcdv3)
	ServerHost    string // TYPHA_SERVERHOST
	ServerPort    int    // TYPHA_SERVERPORT (0: 5473)

	MaxMessageSize   int           // TYPHA_SERVERMAXMESSAGESIZE (100)
	MaxFallBehind    time.Duration // TYPHA_SERVERMAXFALLBEHINDSECS (300)
	PingInterval     time.Duration // TYPHA_SERVERPINGINTERVALSECS (10)
	PongTimeout      time.Duration // TYPHA_SERVERPONGTIMEOUTSECS (60)
	HandshakeTimeout time.Duration // TYPHA_SERVERHANDSHAKETIMEOUTSECS (10)

	// TLS: TYPHA_SERVERCERTFILE, TYPHA_SERVERKEYFILE, TYPHA_CAFILE,
	// TYPHA_CLIENTCN, TYPHA_CLIENTURISAN; any set requires TLS.
	TLS tlsconfig.Files

	HealthEnabled bool   // TYPHA_HEALTHENABLED
	HealthHost    string // TYPHA_HEALTHHOST (localhost)
	HealthPort    int    // TYPHA_HEALTHPORT (9098)

	PrometheusMetricsEnabled bool   // TYPHA_PROMETHEUSMETRICSENABLED
	PrometheusMetricsHost    string // TYPHA_PROMETHEUSMETRICSHOST
	PrometheusMetricsPort    int    // TYPHA_PROMETHEUSMETRICSPORT (9093)

	LogSeverityScreen string // TYPHA_LOGSEVERITYSCREEN (INFO)

	Rebalance Rebalance
}

// Rebalance is Calico's connection governance: a connection limit, set
// from the replicas and nodes there are when ConnectionRebalancingMode is
// "kubernetes", enforced by dropping connections one at a time; and a
// graceful shutdown.
type Rebalance struct {
	Mode                    string        // TYPHA_CONNECTIONREBALANCINGMODE: none (default) or kubernetes
	DropInterval            time.Duration // TYPHA_CONNECTIONDROPINTERVALSECS (1)
	ShutdownTimeout         time.Duration // TYPHA_SHUTDOWNTIMEOUTSECS (300)
	ShutdownMaxDropInterval time.Duration // TYPHA_SHUTDOWNCONNECTIONDROPINTERVALMAXSECS (1)
	MaxConnsUpper           int           // TYPHA_MAXCONNECTIONSUPPERLIMIT (10000)
	MaxConnsLower           int           // TYPHA_MAXCONNECTIONSLOWERLIMIT (400)
	PollInterval            time.Duration // TYPHA_K8SSERVICEPOLLINTERVALSECS (30)
	K8sNamespace            string        // TYPHA_K8SNAMESPACE (kube-system)
	K8sServiceName          string        // TYPHA_K8SSERVICENAME (calico-typha)
	K8sPortName             string        // TYPHA_K8SPORTNAME (calico-typha)
}

// ListenAddr is the server's address.
func (c Config) ListenAddr() string {
	port := c.ServerPort
	if port == 0 {
		port = syncproto.DefaultPort
	}
	return joinHostPort(c.ServerHost, port)
}

func joinHostPort(h string, p int) string {
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	return h + ":" + strconv.Itoa(p)
}

// refused are Calico's TYPHA_* parameters Tabby does not implement: set,
// Typha refuses to start rather than run differently from what was asked.
var refused = map[string]string{
	"PROMETHEUSMETRICSCAFILE":   "the metrics endpoint serves plain HTTP only",
	"PROMETHEUSMETRICSCERTFILE": "the metrics endpoint serves plain HTTP only",
	"PROMETHEUSMETRICSKEYFILE":  "the metrics endpoint serves plain HTTP only",
}

// FromEnv reads Typha's settings.
func FromEnv(getenv func(string) string) (Config, error) {
	c := Config{DatastoreType: "etcdv3", HealthHost: "localhost", HealthPort: 9098, PrometheusMetricsPort: 9093,
		MaxMessageSize: 100, MaxFallBehind: 300 * time.Second, PingInterval: 10 * time.Second,
		PongTimeout: 60 * time.Second, HandshakeTimeout: 10 * time.Second, LogSeverityScreen: "INFO",
		Rebalance: Rebalance{Mode: "none", DropInterval: time.Second, ShutdownTimeout: 300 * time.Second,
			ShutdownMaxDropInterval: time.Second, MaxConnsUpper: 10000, MaxConnsLower: 400, PollInterval: 30 * time.Second,
			K8sNamespace: "kube-system", K8sServiceName: "calico-typha", K8sPortName: "calico-typha"}}
	for name, why := range refused {
		if v := getenv("TYPHA_" + name); v != "" {
			return c, fmt.Errorf("TYPHA_%s=%s is not supported: %s", name, v, why)
		}
	}
	p := parser{getenv: getenv}
	p.str("DATASTORETYPE", &c.DatastoreType)
	p.str("SERVERHOST", &c.ServerHost)
	p.int("SERVERPORT", &c.ServerPort)
	p.int("SERVERMAXMESSAGESIZE", &c.MaxMessageSize)
	p.secs("SERVERMAXFALLBEHINDSECS", &c.MaxFallBehind)
	p.secs("SERVERPINGINTERVALSECS", &c.PingInterval)
	p.secs("SERVERPONGTIMEOUTSECS", &c.PongTimeout)
	p.secs("SERVERHANDSHAKETIMEOUTSECS", &c.HandshakeTimeout)
	p.str("SERVERCERTFILE", &c.TLS.CertFile)
	p.str("SERVERKEYFILE", &c.TLS.KeyFile)
	p.str("CAFILE", &c.TLS.CAFile)
	p.str("CLIENTCN", &c.TLS.CN)
	p.str("CLIENTURISAN", &c.TLS.URISAN)
	p.bool("HEALTHENABLED", &c.HealthEnabled)
	p.str("HEALTHHOST", &c.HealthHost)
	p.int("HEALTHPORT", &c.HealthPort)
	p.bool("PROMETHEUSMETRICSENABLED", &c.PrometheusMetricsEnabled)
	p.str("PROMETHEUSMETRICSHOST", &c.PrometheusMetricsHost)
	p.int("PROMETHEUSMETRICSPORT", &c.PrometheusMetricsPort)
	p.str("LOGSEVERITYSCREEN", &c.LogSeverityScreen)
	r := &c.Rebalance
	p.str("CONNECTIONREBALANCINGMODE", &r.Mode)
	p.secs("CONNECTIONDROPINTERVALSECS", &r.DropInterval)
	p.secs("SHUTDOWNTIMEOUTSECS", &r.ShutdownTimeout)
	p.secs("SHUTDOWNCONNECTIONDROPINTERVALMAXSECS", &r.ShutdownMaxDropInterval)
	p.int("MAXCONNECTIONSUPPERLIMIT", &r.MaxConnsUpper)
	p.int("MAXCONNECTIONSLOWERLIMIT", &r.MaxConnsLower)
	p.secs("K8SSERVICEPOLLINTERVALSECS", &r.PollInterval)
	p.str("K8SNAMESPACE", &r.K8sNamespace)
	p.str("K8SSERVICENAME", &r.K8sServiceName)
	p.str("K8SPORTNAME", &r.K8sPortName)
	if p.err != nil {
		return c, p.err
	}
	r.Mode = strings.ToLower(r.Mode)
	if r.Mode != "none" && r.Mode != "kubernetes" {
		return c, fmt.Errorf("TYPHA_CONNECTIONREBALANCINGMODE=%s: want none or kubernetes", r.Mode)
	}
	if r.MaxConnsUpper < 1 || r.MaxConnsLower < 1 {
		return c, fmt.Errorf("TYPHA_MAXCONNECTIONSUPPERLIMIT and TYPHA_MAXCONNECTIONSLOWERLIMIT must be at least 1")
	}
	switch c.DatastoreType {
	case "kubernetes", "etcdv3":
	default:
		return c, fmt.Errorf("TYPHA_DATASTORETYPE=%s: want kubernetes or etcdv3", c.DatastoreType)
	}
	return c, nil
}

// parser reads TYPHA_<name> values, keeping the first error.
type parser struct {
	getenv func(string) string
	err    error
}

func (p *parser) raw(name string) (string, bool) {
	v := strings.TrimSpace(p.getenv("TYPHA_" + name))
	return v, v != "" && p.err == nil
}

func (p *parser) str(name string, out *string) {
	if v, ok := p.raw(name); ok {
		*out = v
	}
}

func (p *parser) int(name string, out *int) {
	if v, ok := p.raw(name); ok {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			p.err = fmt.Errorf("TYPHA_%s=%q: want a non-negative integer", name, v)
			return
		}
		*out = n
	}
}

func (p *parser) secs(name string, out *time.Duration) {
	if v, ok := p.raw(name); ok {
		f, err := strconv.ParseFloat(v, 64)
		if err != nil || f <= 0 {
			p.err = fmt.Errorf("TYPHA_%s=%q: want a positive number of seconds", name, v)
			return
		}
		*out = time.Duration(f * float64(time.Second))
	}
}

func (p *parser) bool(name string, out *bool) {
	if v, ok := p.raw(name); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			p.err = fmt.Errorf("TYPHA_%s=%q: want true or false", name, v)
			return
		}
		*out = b
	}
}
