package agent

import (
	"context"
	"log/slog"
	"strings"
	"testing"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/lib/calicolog"
)

// TestConfdSettings: Calico's confd variables that Tabby does not
// implement are refused at ERROR with the reason (confd still starts);
// BGP_LOGSEVERITYSCREEN sets the level, a bad one stops confd.
func TestConfdSettings(t *testing.T) {
	var out strings.Builder
	vars := map[string]string{"NODENAME": "n1", "BGP_LOGSEVERITYSCREEN": "Debug", "CALICO_ADVERTISE_CLUSTER_IPS": "10.96.0.0/12",
		"DATASTORE_TYPE": "etcdv3"}
	_ = Run(context.Background(), []string{"-config", "/nonexistent"}, env(vars), &out)
	logs := out.String()
	for _, want := range []string{
		`[ERROR]`, `confd/agent.go`,
		`: confd setting refused reason="advertising Service cluster IPs is not implemented: BIRD announces the node's pod blocks only" setting="CALICO_ADVERTISE_CLUSTER_IPS" value="10.96.0.0/12"`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	for _, l := range strings.Split(strings.TrimSuffix(logs, "\n"), "\n") {
		if !calicolog.LinePattern().MatchString(l) {
			t.Errorf("not Calico's log line format: %q", l)
		}
	}
	if err := Run(context.Background(), nil, env(map[string]string{"BGP_LOGSEVERITYSCREEN": "loud"}), &out); err == nil ||
		!strings.Contains(err.Error(), "BGP_LOGSEVERITYSCREEN") {
		t.Errorf("bad BGP_LOGSEVERITYSCREEN: %v", err)
	}
	if l, ok, err := bgpLogLevel(env(map[string]string{"BGP_LOGSEVERITYSCREEN": "Debug"})); err != nil || !ok || l.String() != "DEBUG" {
		t.Errorf("Debug: %v %v %v", l, ok, err)
	}
}

// TestTyphaSettings: confd reads Calico's Typha settings, CONFD_ over
// FELIX_ over CALICO_, "none" as unset.
func TestTyphaSettings(t *testing.T) {
	s, err := typhaSettings(env(map[string]string{"FELIX_TYPHAK8SSERVICENAME": "calico-typha", "CONFD_TYPHAK8SNAMESPACE": "calico-system",
		"CALICO_TYPHAADDR": "none", "FELIX_TYPHACAFILE": "/felix-ca", "CALICO_TYPHACAFILE": "/ca", "CALICO_TYPHAREADTIMEOUT": "5"}))
	if err != nil {
		t.Fatal(err)
	}
	if !s.Enabled() || s.Addr != "" || s.K8sServiceName != "calico-typha" || s.K8sNamespace != "calico-system" ||
		s.TLS.CAFile != "/felix-ca" || s.ReadTimeout.Seconds() != 5 || s.WriteTimeout.Seconds() != 10 {
		t.Errorf("settings: %+v", s)
	}
	if s, _ := typhaSettings(env(map[string]string{"FELIX_TYPHACAFILE": "/ca"})); s.Enabled() {
		t.Errorf("a CA alone names no Typha: %+v", s)
	}
	if _, err := typhaSettings(env(map[string]string{"FELIX_TYPHAREADTIMEOUT": "soon"})); err == nil {
		t.Error("bad TYPHAREADTIMEOUT accepted")
	}
}

type nopCallbacks struct{ n int }

func (c *nopCallbacks) OnStatusUpdated(datastore.SyncStatus) {}
func (c *nopCallbacks) OnUpdates(u []datastore.Update)       { c.n += len(u) }

// TestLevelFollowsBGPConfiguration: confd's level follows
// logSeverityScreen, the node's BGPConfiguration over the global one over
// the flag; every update still reaches confd.
func TestLevelFollowsBGPConfiguration(t *testing.T) {
	var lv slog.LevelVar
	next := &nopCallbacks{}
	f := &levelFollower{next: next, level: &lv, flag: slog.LevelInfo, node: "n1", log: slog.New(slog.DiscardHandler)}
	bc := func(name, sev string) datastore.Update {
		o := &v3.BGPConfiguration{Spec: v3.BGPConfigurationSpec{LogSeverityScreen: sev}}
		o.Name = name
		return datastore.Update{Type: datastore.EventAdded, Key: datastore.Key{Kind: v3.KindBGPConfiguration, Name: name}, Object: o}
	}
	steps := []struct {
		up   datastore.Update
		want slog.Level
	}{
		{bc("default", "Debug"), slog.LevelDebug},
		{bc("node.other", "Error"), slog.LevelDebug},
		{bc("node.n1", "Warning"), slog.LevelWarn},
		{datastore.Update{Type: datastore.EventDeleted, Key: datastore.Key{Kind: v3.KindBGPConfiguration, Name: "node.n1"}}, slog.LevelDebug},
		{datastore.Update{Type: datastore.EventDeleted, Key: datastore.Key{Kind: v3.KindBGPConfiguration, Name: "default"}}, slog.LevelInfo},
	}
	for i, s := range steps {
		f.OnUpdates([]datastore.Update{s.up})
		if lv.Level() != s.want {
			t.Errorf("step %d (%s): level %v, want %v", i, s.up.Key, lv.Level(), s.want)
		}
	}
	if next.n != len(steps) {
		t.Errorf("confd got %d updates, want %d", next.n, len(steps))
	}
}
