package agent

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	felixconfig "github.com/tabbynet/tabby/felix/config"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/rules"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

// load resolves an environment (FELIX_* and others) and FelixConfiguration
// specs as Run does.
func load(t *testing.T, vars map[string]string, global, node *v3.FelixConfigurationSpec) (config, *felixconfig.Settings, error) {
	t.Helper()
	_, envMap, _, err := localSources(Options{Getenv: env(vars), ConfigFile: t.TempDir() + "/absent.cfg"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := felixconfig.Resolve(felixconfig.Sources{Env: envMap, Global: global, Node: node})
	if err != nil {
		return config{}, s, err
	}
	c, err := fromSettings(s, env(vars))
	return c, s, err
}

func TestLoadConfig(t *testing.T) {
	c, _, err := load(t, map[string]string{"NODENAME": "n1"}, nil, nil)
	if err != nil || c.hostname != "n1" || c.refreshInterval != 180*time.Second || !c.ipv6 || c.healthPort != 9099 ||
		c.statusPrefix != "/var/run/calico" || c.mtuFile != "/var/lib/calico/mtu" || c.markAccept != 0x10000 || c.markPass != 0x20000 ||
		c.logScreen != "INFO" || c.chainAppend {
		t.Fatalf("defaults: %+v %v", c, err)
	}
	c, s, err := load(t, map[string]string{"FELIX_FELIXHOSTNAME": "n2", "FELIX_LOGSEVERITYSCREEN": "Trace",
		"FELIX_IPTABLESREFRESHINTERVAL": "2.5", "FELIX_IPV6SUPPORT": "false", "FELIX_HEALTHENABLED": "true",
		"FELIX_DEFAULTENDPOINTTOHOSTACTION": "Accept", "FELIX_INTERFACEPREFIX": "cali,tap",
		"FELIX_FAILSAFEINBOUNDHOSTPORTS": "tcp:22, UDP:68", "FELIX_FAILSAFEOUTBOUNDHOSTPORTS": "none",
		"FELIX_IPTABLESMARKMASK": "0xff000", "FELIX_CHAININSERTMODE": "Append", "FELIX_ENDPOINTSTATUSPATHPREFIX": "none",
		"TABBY_FELIX_MTU_FILE": "none", "FELIX_NATOUTGOINGADDRESS": "192.0.2.7"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := rulesConfig(c, s)
	if c.hostname != "n2" || c.logScreen != "TRACE" || c.refreshInterval != 2500*time.Millisecond || c.ipv6 || !c.healthEnabled ||
		c.markAccept != 0x1000 || c.markPass != 0x2000 || !c.chainAppend || c.statusPrefix != "" || c.mtuFile != "" {
		t.Errorf("config = %+v", c)
	}
	if rc.EndpointToHostAction != "ACCEPT" || len(rc.WorkloadIfacePrefixes) != 2 || rc.MarkAccept != 0x1000 ||
		len(rc.FailsafeInbound) != 2 || rc.FailsafeInbound[1] != (rules.ProtoPort{Protocol: "udp", Port: 68}) ||
		rc.FailsafeOutbound == nil || len(rc.FailsafeOutbound) != 0 || rc.NATOutgoingAddress != "192.0.2.7" {
		t.Errorf("rules config = %+v", rc)
	}
	if _, _, err := load(t, map[string]string{"NODENAME": "n", "FELIX_CHAININSERTMODE": "bogus"}, nil, nil); err == nil ||
		!strings.Contains(err.Error(), "ChainInsertMode") {
		t.Errorf("FELIX_CHAININSERTMODE=bogus: %v, want a fatal error as Calico's", err)
	}
	if _, _, err := load(t, map[string]string{"NODENAME": "n", "FELIX_IPTABLESMARKMASK": "0x10000"}, nil, nil); err == nil {
		t.Error("a one-bit mark mask was accepted")
	}
}

func TestDatastoreEnv(t *testing.T) {
	g := datastoreEnv(env(map[string]string{"FELIX_DATASTORETYPE": "etcdv3", "ETCD_ENDPOINTS": "http://x:2379"}), nil)
	if g("DATASTORE_TYPE") != "etcdv3" || g("ETCD_ENDPOINTS") != "http://x:2379" {
		t.Error("FELIX_ variants or plain variables not read")
	}
	g = datastoreEnv(env(map[string]string{
		"FELIX_ETCDCAFILE": "/ca.pem", "FELIX_ETCDCERTFILE": "/c.pem", "FELIX_ETCDKEYFILE": "/k.pem",
		"FELIX_ETCDADDR": "etcd:2379", "FELIX_ETCDSCHEME": "https", "ETCD_USERNAME": "u",
	}), nil)
	for k, want := range map[string]string{
		"ETCD_CA_CERT_FILE": "/ca.pem", "ETCD_CERT_FILE": "/c.pem", "ETCD_KEY_FILE": "/k.pem",
		"ETCD_ENDPOINTS": "https://etcd:2379", "ETCD_USERNAME": "u",
	} {
		if got := g(k); got != want {
			t.Errorf("%s = %q, want %q (Calico felix's variable names)", k, got, want)
		}
	}
	g = datastoreEnv(env(nil), map[string]string{"DatastoreType": "kubernetes", "EtcdEndpoints": "http://f:2379"})
	if g("DATASTORE_TYPE") != "kubernetes" || g("ETCD_ENDPOINTS") != "http://f:2379" {
		t.Error("felix.cfg's datastore settings not read")
	}
}

func TestRulesConfigPrecedence(t *testing.T) {
	ports := func(pp ...v3.ProtoPort) *[]v3.ProtoPort { return &pp }
	global := &v3.FelixConfigurationSpec{InterfacePrefix: "tap", DefaultEndpointToHostAction: "Accept", NATOutgoingAddress: "192.0.2.1",
		FailsafeInboundHostPorts: ports(v3.ProtoPort{Protocol: "TCP", Port: 22})}
	node := &v3.FelixConfigurationSpec{FailsafeInboundHostPorts: ports(v3.ProtoPort{Protocol: "tcp", Port: 2222, Net: "10.0.0.0/8"})}
	tests := []struct {
		name string
		env  map[string]string
		g, n *v3.FelixConfigurationSpec
		want func(rules.Config) bool
	}{
		{"defaults", nil, nil, nil, func(rc rules.Config) bool {
			return rc.EndpointToHostAction == "DROP" && rc.WorkloadIfacePrefixes[0] == "cali" && len(rc.FailsafeInbound) == 9
		}},
		{"global", nil, global, nil, func(rc rules.Config) bool {
			return rc.EndpointToHostAction == "ACCEPT" && rc.WorkloadIfacePrefixes[0] == "tap" && rc.FailsafeInbound[0].Port == 22 &&
				rc.NATOutgoingAddress == "192.0.2.1"
		}},
		{"node over global", nil, global, node, func(rc rules.Config) bool {
			return rc.WorkloadIfacePrefixes[0] == "tap" && rc.FailsafeInbound[0] == rules.ProtoPort{Protocol: "tcp", Port: 2222, Net: "10.0.0.0/8"}
		}},
		{"env over all", map[string]string{"FELIX_DEFAULTENDPOINTTOHOSTACTION": "return", "FELIX_FAILSAFEINBOUNDHOSTPORTS": "none",
			"FELIX_NATOUTGOINGADDRESS": "192.0.2.7"}, global, node, func(rc rules.Config) bool {
			return rc.EndpointToHostAction == "RETURN" && len(rc.FailsafeInbound) == 0 && rc.NATOutgoingAddress == "192.0.2.7"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			vars := map[string]string{"NODENAME": "n"}
			for k, v := range tt.env {
				vars[k] = v
			}
			c, s, err := load(t, vars, tt.g, tt.n)
			if err != nil {
				t.Fatal(err)
			}
			if rc := rulesConfig(c, s); !tt.want(rc) {
				t.Errorf("got %+v", rc)
			}
		})
	}
}

// TestFlowLogSettings: FlowLogsLocalReporter turns on the NFLOG marks with
// a third (drop) mark bit, FlowLogsFlushInterval and the debug trace are
// taken, and a mask with only two bits is refused when flow logs need
// three.
func TestFlowLogSettings(t *testing.T) {
	c, s, err := load(t, map[string]string{"NODENAME": "n"}, nil, nil)
	if err != nil || c.flowLogs || rulesConfig(c, s).FlowLogs {
		t.Fatalf("flow logs on by default: %+v %v", c, err)
	}
	on := "Enabled"
	spec := &v3.FelixConfigurationSpec{FlowLogsLocalReporter: &on, FlowLogsFlushInterval: &metav1.Duration{Duration: 15 * time.Second}}
	c, s, err = load(t, map[string]string{"NODENAME": "n", "FELIX_FLOWLOGSCOLLECTORDEBUGTRACE": "true",
		"TABBY_FELIX_FLOW_SOCKET_DIR": "/run/x"}, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	rc := rulesConfig(c, s)
	if !c.flowLogs || c.flowFlush != 15*time.Second || !c.flowDebug || c.flowSocketDir != "/run/x" ||
		!rc.FlowLogs || rc.MarkAccept != 0x10000 || rc.MarkPass != 0x20000 || rc.MarkDrop != 0x40000 {
		t.Errorf("config %+v, rules config %+v", c, rc)
	}
	if p := s.Problems; len(p) > 0 {
		t.Errorf("honoured flow log settings reported: %v", p)
	}
	if _, _, err := load(t, map[string]string{"NODENAME": "n", "FELIX_IPTABLESMARKMASK": "0x30000"}, spec, nil); err == nil ||
		!strings.Contains(err.Error(), "3 mark bits") {
		t.Errorf("a two-bit mask with flow logs: %v, want refused", err)
	}
}

// TestGoldmaneSettings: FlowLogsGoldmaneServer alone turns flow logs on
// (Calico's FlowLogsEnabled) without the local socket, with felix's Typha
// client certificate for the connection; none is reported as a problem.
func TestGoldmaneSettings(t *testing.T) {
	server := "goldmane.kube-system.svc:7443"
	spec := &v3.FelixConfigurationSpec{FlowLogsGoldmaneServer: &server}
	c, s, err := load(t, map[string]string{"NODENAME": "n", "FELIX_TYPHACERTFILE": "/node-certs/tls.crt",
		"FELIX_TYPHAKEYFILE": "/node-certs/tls.key", "FELIX_TYPHACAFILE": "/etc/pki/tls/certs/tigera-ca-bundle.crt"}, spec, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := goldmaneConfig{server: server, cert: "/node-certs/tls.crt", key: "/node-certs/tls.key", ca: "/etc/pki/tls/certs/tigera-ca-bundle.crt"}
	if !c.flowLogs || c.flowLocal || c.goldmane != want || !rulesConfig(c, s).FlowLogs {
		t.Errorf("config %+v", c)
	}
	if p := s.Problems; len(p) > 0 {
		t.Errorf("honoured Goldmane settings reported: %v", p)
	}
}

// TestTyphaSettings: Calico's Typha settings are read (none reported as a
// problem), "none" is unset, and a Service without the Kubernetes
// datastore is refused when the syncer is made.
func TestTyphaSettings(t *testing.T) {
	c, s, err := load(t, map[string]string{"NODENAME": "n", "FELIX_TYPHAK8SSERVICENAME": "calico-typha",
		"FELIX_TYPHAK8SNAMESPACE": "calico-system", "FELIX_TYPHAREADTIMEOUT": "5", "FELIX_TYPHACN": "typha-server",
		"FELIX_TYPHACAFILE": "/ca.crt"}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ty := c.typha
	if !ty.Enabled() || ty.K8sServiceName != "calico-typha" || ty.K8sNamespace != "calico-system" || ty.ReadTimeout != 5*time.Second ||
		ty.WriteTimeout != 10*time.Second || ty.TLS.CN != "typha-server" || ty.TLS.CAFile != "/ca.crt" {
		t.Errorf("typha settings %+v", ty)
	}
	if p := s.Problems; len(p) > 0 {
		t.Errorf("honoured Typha settings reported: %v", p)
	}
	if _, err := daemon.NewTyphaSyncer(nil, ty, "n", nil, nil); err == nil {
		t.Error("a Typha Service without the Kubernetes datastore accepted")
	}
	c, _, _ = load(t, map[string]string{"NODENAME": "n", "FELIX_TYPHAK8SSERVICENAME": "none"}, nil, nil)
	if c.typha.Enabled() {
		t.Errorf("typhaK8sServiceName none: %+v", c.typha)
	}
}
