package agent

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/rules"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		name    string
		env     map[string]string
		check   func(config) bool
		wantErr string
	}{
		{"defaults", map[string]string{"NODENAME": "n1"}, func(c config) bool {
			return c.hostname == "n1" && c.refreshInterval == 90*time.Second && c.ipv6 && c.healthPort == 9099 && c.endpointToHost == ""
		}, ""},
		{"felix vars", map[string]string{"FELIX_FELIXHOSTNAME": "n2", "FELIX_LOGSEVERITYSCREEN": "Debug",
			"FELIX_IPTABLESREFRESHINTERVAL": "2.5", "FELIX_IPV6SUPPORT": "false", "FELIX_HEALTHENABLED": "true",
			"FELIX_DEFAULTENDPOINTTOHOSTACTION": "Accept", "FELIX_INTERFACEPREFIX": "cali,tap",
			"FELIX_FAILSAFEINBOUNDHOSTPORTS": "tcp:22, UDP:68", "FELIX_FAILSAFEOUTBOUNDHOSTPORTS": "none"}, func(c config) bool {
			return c.hostname == "n2" && c.logLevel == slog.LevelDebug && c.refreshInterval == 2500*time.Millisecond &&
				!c.ipv6 && c.healthEnabled && c.endpointToHost == "ACCEPT" && len(c.ifacePrefixes) == 2 &&
				len(c.failsafeIn) == 2 && c.failsafeIn[1] == rules.ProtoPort{Protocol: "udp", Port: 68} &&
				c.failsafeOut != nil && len(c.failsafeOut) == 0
		}, ""},
		{"bad values reported together", map[string]string{"NODENAME": "n", "FELIX_HEALTHPORT": "0", "FELIX_IPV6SUPPORT": "maybe"},
			nil, "FELIX_HEALTHPORT"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadConfig(env(tt.env))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "FELIX_IPV6SUPPORT") {
					t.Fatalf("err = %v, want one naming %s and FELIX_IPV6SUPPORT", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tt.check(c) {
				t.Errorf("config = %+v", c)
			}
		})
	}
}

func TestDatastoreEnv(t *testing.T) {
	g := datastoreEnv(env(map[string]string{"FELIX_DATASTORETYPE": "etcdv3", "ETCD_ENDPOINTS": "http://x:2379"}))
	if g("DATASTORE_TYPE") != "etcdv3" || g("ETCD_ENDPOINTS") != "http://x:2379" {
		t.Error("FELIX_ variants or plain variables not read")
	}
	g = datastoreEnv(env(map[string]string{
		"FELIX_ETCDCAFILE": "/ca.pem", "FELIX_ETCDCERTFILE": "/c.pem", "FELIX_ETCDKEYFILE": "/k.pem",
		"FELIX_ETCDADDR": "etcd:2379", "FELIX_ETCDSCHEME": "https", "ETCD_USERNAME": "u",
	}))
	for k, want := range map[string]string{
		"ETCD_CA_CERT_FILE": "/ca.pem", "ETCD_CERT_FILE": "/c.pem", "ETCD_KEY_FILE": "/k.pem",
		"ETCD_ENDPOINTS": "https://etcd:2379", "ETCD_USERNAME": "u",
	} {
		if got := g(k); got != want {
			t.Errorf("%s = %q, want %q (Calico felix's variable names)", k, got, want)
		}
	}
}

func TestRulesConfigPrecedence(t *testing.T) {
	ports := func(pp ...v3.ProtoPort) *[]v3.ProtoPort { return &pp }
	global := &v3.FelixConfigurationSpec{InterfacePrefix: "tap", DefaultEndpointToHostAction: "Accept",
		FailsafeInboundHostPorts: ports(v3.ProtoPort{Protocol: "TCP", Port: 22})}
	node := &v3.FelixConfigurationSpec{FailsafeInboundHostPorts: ports(v3.ProtoPort{Protocol: "tcp", Port: 2222, Net: "10.0.0.0/8"})}
	tests := []struct {
		name string
		env  config
		g, n *v3.FelixConfigurationSpec
		want func(rules.Config) bool
	}{
		{"defaults", config{}, nil, nil, func(rc rules.Config) bool {
			return rc.EndpointToHostAction == "DROP" && rc.WorkloadIfacePrefixes[0] == "cali" && len(rc.FailsafeInbound) == 9
		}},
		{"global", config{}, global, nil, func(rc rules.Config) bool {
			return rc.EndpointToHostAction == "ACCEPT" && rc.WorkloadIfacePrefixes[0] == "tap" && rc.FailsafeInbound[0].Port == 22
		}},
		{"node over global", config{}, global, node, func(rc rules.Config) bool {
			return rc.WorkloadIfacePrefixes[0] == "tap" && rc.FailsafeInbound[0] == rules.ProtoPort{Protocol: "tcp", Port: 2222, Net: "10.0.0.0/8"}
		}},
		{"env over all", config{endpointToHost: "RETURN", failsafeIn: []rules.ProtoPort{}}, global, node, func(rc rules.Config) bool {
			return rc.EndpointToHostAction == "RETURN" && len(rc.FailsafeInbound) == 0
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if rc := rulesConfig(tt.env, tt.g, tt.n); !tt.want(rc) {
				t.Errorf("got %+v", rc)
			}
		})
	}
}
