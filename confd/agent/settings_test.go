package agent

import (
	"context"
	"strings"
	"testing"
)

// TestConfdSettings: Calico's confd variables that Tabby does not
// implement are refused at ERROR with the reason (confd still starts);
// BGP_LOGSEVERITYSCREEN sets the level, a bad one stops confd.
func TestConfdSettings(t *testing.T) {
	var out strings.Builder
	vars := map[string]string{"NODENAME": "n1", "BGP_LOGSEVERITYSCREEN": "Debug", "CALICO_ADVERTISE_CLUSTER_IPS": "10.96.0.0/12",
		"FELIX_TYPHAK8SSERVICENAME": "calico-typha", "CONFD_TYPHAK8SNAMESPACE": "kube-system", "CALICO_TYPHAADDR": "none",
		"DATASTORE_TYPE": "etcdv3"}
	_ = Run(context.Background(), []string{"-config", "/nonexistent"}, env(vars), &out)
	logs := out.String()
	for _, want := range []string{
		`level=ERROR msg="confd setting refused" setting=CALICO_ADVERTISE_CLUSTER_IPS value=10.96.0.0/12 reason="advertising Service cluster IPs is not implemented`,
		`level=ERROR msg="confd setting refused" setting=FELIX_TYPHAK8SSERVICENAME value=calico-typha reason="Tabby has no Typha`,
	} {
		if !strings.Contains(logs, want) {
			t.Errorf("log lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "CONFD_TYPHAK8SNAMESPACE") || strings.Contains(logs, "CALICO_TYPHAADDR") {
		t.Errorf("default/none Typha values refused:\n%s", logs)
	}
	if err := Run(context.Background(), nil, env(map[string]string{"BGP_LOGSEVERITYSCREEN": "loud"}), &out); err == nil ||
		!strings.Contains(err.Error(), "BGP_LOGSEVERITYSCREEN") {
		t.Errorf("bad BGP_LOGSEVERITYSCREEN: %v", err)
	}
	if l, ok, err := bgpLogLevel(env(map[string]string{"BGP_LOGSEVERITYSCREEN": "Debug"})); err != nil || !ok || l.String() != "DEBUG" {
		t.Errorf("Debug: %v %v %v", l, ok, err)
	}
}
