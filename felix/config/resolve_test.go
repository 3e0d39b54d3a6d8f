package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func dur(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func TestPrecedence(t *testing.T) {
	global := &v3.FelixConfigurationSpec{RouteRefreshInterval: dur(10 * time.Second), HealthPort: new(1001), LogSeverityScreen: "Warning", IptablesRefreshInterval: dur(7 * time.Second)}
	node := &v3.FelixConfigurationSpec{RouteRefreshInterval: dur(20 * time.Second), HealthPort: new(1002), LogSeverityScreen: "Error"}
	file := map[string]string{"HealthPort": "1003", "LogSeverityScreen": "Debug"}
	env := map[string]string{"LOGSEVERITYSCREEN": "trace"}
	s, err := Resolve(Sources{Env: env, File: file, Node: node, Global: global})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		want any
		src  Source
	}{
		{"LogSeverityScreen", "TRACE", SourceEnv},
		{"HealthPort", 1003, SourceFile},
		{"RouteRefreshInterval", 20 * time.Second, SourceNode},
		{"IptablesRefreshInterval", 7 * time.Second, SourceGlobal},
		{"PrometheusMetricsPort", 9091, SourceDefault},
	} {
		if v := s.Get(c.name); v.V != c.want || v.Source != c.src {
			t.Errorf("%s = %v from %v, want %v from %v", c.name, v.V, v.Source, c.want, c.src)
		}
	}
	if len(s.Problems) != 0 {
		t.Errorf("problems: %v", s.Problems)
	}
}

func TestProblems(t *testing.T) {
	tests := []struct {
		name  string
		src   Sources
		want  []string // Setting/kind of each problem
		fatal bool
		check func(*Settings) string
	}{
		{"bogus chain insert mode is fatal, as in Calico", Sources{Env: map[string]string{"CHAININSERTMODE": "bogus"}},
			[]string{"ChainInsertMode/invalid"}, true, nil},
		{"bad mark mask is fatal", Sources{Env: map[string]string{"IPTABLESMARKMASK": "0"}}, []string{"IptablesMarkMask/invalid"}, true, nil},
		{"bad bool falls back to the default", Sources{Env: map[string]string{"IPV6SUPPORT": "maybe"}}, []string{"Ipv6Support/invalid"}, false,
			func(s *Settings) string {
				if !s.Bool("Ipv6Support") {
					return "Ipv6Support not the default true"
				}
				return ""
			}},
		{"none on a non-zero setting", Sources{Env: map[string]string{"INTERFACEPREFIX": "none"}}, []string{"InterfacePrefix/invalid"}, true, nil},
		{"bpf refused, wireguard and nftables honoured", Sources{Env: map[string]string{"BPFENABLED": "true"},
			Global: &v3.FelixConfigurationSpec{WireguardEnabled: new(true), NFTablesMode: new(v3.NFTablesModeEnabled)}},
			[]string{"BPFEnabled/refused"}, false, func(s *Settings) string {
				if s.String("NFTablesMode") != "Enabled" {
					return "NFTablesMode not Enabled: " + s.String("NFTablesMode")
				}
				if !s.Bool("WireguardEnabled") {
					return "WireguardEnabled not true"
				}
				return ""
			}},
		{"allowed values of refused settings pass", Sources{Env: map[string]string{"BPFENABLED": "false", "USAGEREPORTINGENABLED": "false",
			"NFTABLESMODE": "Auto", "TYPHAK8SSERVICENAME": "none", "WIREGUARDMTU": "0"}}, nil, false, nil},
		{"typha honoured", Sources{Env: map[string]string{"TYPHAADDR": "typha:5473", "TYPHACN": "typha-server"}}, nil, false,
			func(s *Settings) string {
				if s.String("TyphaAddr") != "typha:5473" || s.String("TyphaCN") != "typha-server" {
					return "Typha settings not read: " + s.String("TyphaAddr") + " " + s.String("TyphaCN")
				}
				return ""
			}},
		{"status reporting off (calico-node's default FelixConfiguration) passes, on is refused",
			Sources{Global: &v3.FelixConfigurationSpec{ReportingInterval: &metav1.Duration{}}, Env: map[string]string{"REPORTINGINTERVALSECS": ""}}, nil, false, nil},
		{"status reporting on is refused", Sources{Env: map[string]string{"REPORTINGINTERVALSECS": "30"}}, []string{"ReportingIntervalSecs/refused"}, false, nil},
		{"nothing set: no problem", Sources{}, nil, false, nil},
		{"local-only from the datastore ignored", Sources{Global: nil, Node: &v3.FelixConfigurationSpec{}, Env: map[string]string{"NOSUCHTHING": "1"}},
			[]string{"nosuchthing/unknown"}, false, nil},
		{"invalid log level falls back", Sources{File: map[string]string{"LogSeverityScreen": "loud"}}, []string{"LogSeverityScreen/invalid"}, false, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Resolve(tt.src)
			if tt.fatal != (err != nil) || (err != nil && !errors.Is(err, ErrFatal)) {
				t.Errorf("err = %v, fatal want %v", err, tt.fatal)
			}
			var got []string
			for _, p := range s.Problems {
				got = append(got, p.Setting+"/"+string(p.Kind))
				if p.Reason == "" {
					t.Errorf("problem without reason: %v", p)
				}
			}
			if strings.Join(got, " ") != strings.Join(tt.want, " ") {
				t.Errorf("problems %v, want %v", got, tt.want)
			}
			if tt.check != nil {
				if msg := tt.check(s); msg != "" {
					t.Error(msg)
				}
			}
		})
	}
}

func TestChanged(t *testing.T) {
	a, _ := Resolve(Sources{})
	b, _ := Resolve(Sources{Global: &v3.FelixConfigurationSpec{LogSeverityScreen: "Debug", HealthPort: new(1234), BPFEnabled: new(true)}})
	live, restart := b.Changed(a)
	if strings.Join(live, ",") != "LogSeverityScreen" || strings.Join(restart, ",") != "HealthPort" {
		t.Errorf("live %v restart %v", live, restart)
	}
}

func TestLoadFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "felix.cfg")
	if err := os.WriteFile(p, []byte("# felix\n[global]\nLogSeverityScreen = Debug\n; c\nMetadataAddr: \"None\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	m, err := LoadFile(p)
	if err != nil || m["LogSeverityScreen"] != "Debug" || m["MetadataAddr"] != "None" {
		t.Fatalf("%v %v", m, err)
	}
	if m, err := LoadFile(filepath.Join(t.TempDir(), "absent")); m != nil || err != nil {
		t.Errorf("absent file: %v %v", m, err)
	}
	env := EnvFrom([]string{"FELIX_BPFENABLED=true", "PATH=/bin", "felix_x=1"})
	if env["BPFENABLED"] != "true" || env["x"] != "1" || len(env) != 2 {
		t.Errorf("EnvFrom = %v", env)
	}
}
