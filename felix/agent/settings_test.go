package agent

import (
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// TestOnDatastore: a FelixConfiguration change applies live settings (log
// levels), reports refused values once, and asks for a restart when a
// start-time setting changes.
func TestOnDatastore(t *testing.T) {
	var buf strings.Builder
	log, logs, _ := newLogger(&buf, "INFO", "", "INFO", false)
	st := &settingsState{env: map[string]string{}, log: log, metric: newProblemMetric(prometheus.NewRegistry()), logs: logs,
		getenv: env(map[string]string{"NODENAME": "n"})}
	var restarted error
	st.restart = func(err error) { restarted = err }
	s, err := st.resolve(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.current = s
	st.cfg, _ = fromSettings(s, st.getenv)

	st.onDatastore(&v3.FelixConfigurationSpec{LogSeverityScreen: "Debug", BPFEnabled: new(true)}, nil)
	if logs.screen.Level() != slog.LevelDebug {
		t.Errorf("screen level %v after logSeverityScreen: Debug", logs.screen.Level())
	}
	if restarted != nil {
		t.Errorf("restart for a live setting: %v", restarted)
	}
	if n := strings.Count(buf.String(), `: felix setting refused reason="the eBPF dataplane is not implemented: felix programs iptables and ipsets (keep kube-proxy for Services)" setting="BPFEnabled"`); n != 1 {
		t.Errorf("bpfEnabled refusal logged %d times:\n%s", n, buf.String())
	}
	st.onDatastore(&v3.FelixConfigurationSpec{LogSeverityScreen: "Trace", BPFEnabled: new(true)}, nil)
	if logs.screen.Level() != LevelTrace {
		t.Errorf("screen level %v after logSeverityScreen: Trace", logs.screen.Level())
	}
	if n := strings.Count(buf.String(), `setting="BPFEnabled"`); n != 1 {
		t.Errorf("bpfEnabled refusal logged again")
	}
	st.onDatastore(&v3.FelixConfigurationSpec{HealthPort: new(1234)}, nil)
	if !errors.Is(restarted, ErrConfigChanged) || !strings.Contains(restarted.Error(), "HealthPort") {
		t.Errorf("restart = %v", restarted)
	}
}

// TestSecuritySettingNotReady: a security setting felix cannot honour
// (bpfEnabled) makes the settings not ready, naming it, and sets
// tabby_felix_security_settings_unhonoured; a refused setting that is not
// about security (xdpEnabled) does not.
func TestSecuritySettingNotReady(t *testing.T) {
	var buf strings.Builder
	log, logs, _ := newLogger(&buf, "INFO", "", "INFO", false)
	reg := prometheus.NewRegistry()
	st := newSettingsState(map[string]string{}, nil, log, reg, logs, env(map[string]string{"NODENAME": "n"}))
	st.restart = func(error) {}
	s, err := st.resolve(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	st.report(s)
	st.current = s
	st.cfg, _ = fromSettings(s, st.getenv)
	if ok, why := st.Ready(); !ok {
		t.Fatalf("defaults: not ready: %s", why)
	}
	st.onDatastore(&v3.FelixConfigurationSpec{BPFEnabled: new(true), XDPEnabled: new(true)}, nil)
	ok, why := st.Ready()
	if ok || why != "BPFEnabled=true (FelixConfiguration default) cannot be honoured: "+
		"the eBPF dataplane is not implemented: felix programs iptables and ipsets (keep kube-proxy for Services)" {
		t.Fatalf("bpfEnabled: ready=%v %q", ok, why)
	}
	if v := testutil.ToFloat64(st.secMetric); v != 1 {
		t.Errorf("tabby_felix_security_settings_unhonoured = %v", v)
	}
	if n := strings.Count(buf.String(), "felix is not ready: a security setting cannot be honoured"); n != 1 {
		t.Errorf("logged %d times:\n%s", n, buf.String())
	}
	st.onDatastore(&v3.FelixConfigurationSpec{XDPEnabled: new(true)}, nil)
	if ok, why := st.Ready(); !ok {
		t.Fatalf("after removal: %s", why)
	}
}
