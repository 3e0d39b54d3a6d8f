package config

import (
	"os"
	"reflect"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestEverySpecFieldClassified walks FelixConfigurationSpec: every field
// is a setting of the table, honoured or refused with a reason, so none
// can be silently ignored.
func TestEverySpecFieldClassified(t *testing.T) {
	st := reflect.TypeFor[v3.FelixConfigurationSpec]()
	for i := range st.NumField() {
		f := st.Field(i)
		p, ok := ForField(f.Name)
		if !ok {
			t.Errorf("FelixConfigurationSpec.%s has no entry in felix/config's table", f.Name)
			continue
		}
		if p.Class == Refused && p.Reason == "" {
			t.Errorf("%s is refused without a reason", p.Name)
		}
	}
	for _, p := range Params {
		if p.Field != "" {
			if _, ok := st.FieldByName(p.Field); !ok {
				t.Errorf("%s names FelixConfigurationSpec.%s, which does not exist", p.Name, p.Field)
			}
		}
	}
}

// TestTableDefaultsParse: every default and allowed value parses, and the
// default of a refused setting is allowed unless the setting refuses any
// value.
func TestTableDefaultsParse(t *testing.T) {
	seen := map[string]bool{}
	for _, p := range Params {
		if seen[strings.ToLower(p.Name)] {
			t.Errorf("%s twice", p.Name)
		}
		seen[strings.ToLower(p.Name)] = true
		if p.Default != "" {
			if _, err := p.parse(p.Default); err != nil {
				t.Errorf("%s: default %q: %v", p.Name, p.Default, err)
			}
		}
		for _, a := range p.Allowed {
			if _, err := p.parse(a); err != nil {
				t.Errorf("%s: allowed %q: %v", p.Name, a, err)
			}
		}
	}
}

// TestSpecRoundTrip: a value set in a FelixConfiguration reads back as the
// same value set in the environment.
func TestSpecRoundTrip(t *testing.T) {
	mask := uint32(0xff000000)
	backend := v3.IptablesBackendLegacy
	spec := &v3.FelixConfigurationSpec{IptablesMarkMask: &mask, IptablesBackend: &backend, LogSeverityScreen: "Debug",
		FailsafeInboundHostPorts: &[]v3.ProtoPort{{Protocol: "TCP", Port: 22}, {Protocol: "udp", Port: 53, Net: "fd00::/8"}}}
	fromSpec, err := Resolve(Sources{Global: spec})
	if err != nil {
		t.Fatal(err)
	}
	fromEnv, err := Resolve(Sources{Env: map[string]string{"IPTABLESMARKMASK": "0xff000000", "iptablesbackend": "legacy",
		"LOGSEVERITYSCREEN": "debug", "FAILSAFEINBOUNDHOSTPORTS": "tcp:22,udp:[fd00::/8]:53"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"IptablesMarkMask", "IptablesBackend", "LogSeverityScreen", "FailsafeInboundHostPorts"} {
		if a, b := fromSpec.Get(n).V, fromEnv.Get(n).V; !reflect.DeepEqual(a, b) {
			t.Errorf("%s: spec gives %#v, environment %#v", n, a, b)
		}
	}
	if fromSpec.Get("LogSeverityScreen").V != "DEBUG" {
		t.Errorf("LogSeverityScreen = %v", fromSpec.Get("LogSeverityScreen").V)
	}
}

// TestSecuritySettingsDocumented: every security setting is a refused one
// (an honoured setting needs no readiness guard), has a FelixConfiguration
// field, and is named in the README's list, so the documented list is the
// table's.
func TestSecuritySettingsDocumented(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(readme), "**Security settings**")
	section, _, _ = strings.Cut(section, "The settings of those features")
	st := reflect.TypeFor[v3.FelixConfigurationSpec]()
	n := 0
	for _, p := range Params {
		if !p.Security {
			continue
		}
		n++
		if p.Class != Refused || p.Field == "" {
			t.Errorf("%s is marked Security but is %s with field %q", p.Name, p.Class, p.Field)
			continue
		}
		f, _ := st.FieldByName(p.Field)
		json, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		short := strings.TrimPrefix(json, "prometheusMetrics") // listed as prometheusMetricsCAFile/CertFile/...
		if !strings.Contains(section, "`"+json) && !strings.Contains(section, short+"`") && !strings.Contains(section, "/"+short) {
			t.Errorf("security setting %s (%s) is not in the README's list", p.Name, json)
		}
	}
	if n == 0 {
		t.Fatal("no security settings: the test proves nothing")
	}
}
