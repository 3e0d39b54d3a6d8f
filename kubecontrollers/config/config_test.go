package config

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func envOf(m map[string]string) Env {
	return FromEnv(func(k string) string { return m[k] })
}

func TestMergeDefaults(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		want RunConfig
	}{
		{
			name: "etcd: every controller of the default object, LoadBalancer left out",
			env:  map[string]string{},
			want: RunConfig{LogLevel: slog.LevelInfo, EtcdV3CompactionPeriod: 10 * time.Minute, HealthEnabled: true, PrometheusPort: 9094,
				Controllers: Controllers{
					Node:             &NodeConfig{DeleteNodes: true, SyncLabels: true, LeakGracePeriod: 15 * time.Minute, ReconcilerPeriod: 5 * time.Minute},
					Policy:           &GenericConfig{ReconcilerPeriod: 5 * time.Minute},
					WorkloadEndpoint: &GenericConfig{ReconcilerPeriod: 5 * time.Minute},
					ServiceAccount:   &GenericConfig{ReconcilerPeriod: 5 * time.Minute},
					Namespace:        &GenericConfig{ReconcilerPeriod: 5 * time.Minute},
				}},
		},
		{
			name: "kubernetes, ENABLED_CONTROLLERS=node: nodes are not deleted, labels not synced",
			env:  map[string]string{"DATASTORE_TYPE": "kubernetes", "ENABLED_CONTROLLERS": "node", "LOG_LEVEL": "debug", "HEALTH_ENABLED": "false"},
			want: RunConfig{LogLevel: slog.LevelDebug, EtcdV3CompactionPeriod: 10 * time.Minute, PrometheusPort: 9094,
				Controllers: Controllers{Node: &NodeConfig{LeakGracePeriod: 15 * time.Minute, ReconcilerPeriod: 5 * time.Minute}}},
		},
		{
			name: "RECONCILER_PERIOD applies to every enabled mirroring controller",
			env:  map[string]string{"ENABLED_CONTROLLERS": "policy,profile", "RECONCILER_PERIOD": "1m", "COMPACTION_PERIOD": "0"},
			want: RunConfig{LogLevel: slog.LevelInfo, HealthEnabled: true, PrometheusPort: 9094,
				Controllers: Controllers{Policy: &GenericConfig{ReconcilerPeriod: time.Minute}, Namespace: &GenericConfig{ReconcilerPeriod: time.Minute}}},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, st, err := Merge(envOf(tc.env), v3.KubeControllersDefaults())
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("run config (-want +got):\n%s", d)
			}
			for k, v := range tc.env {
				if k != "DATASTORE_TYPE" && st.EnvironmentVars[k] != v {
					t.Errorf("status environmentVars %v lacks %s=%s", st.EnvironmentVars, k, v)
				}
			}
			if st.RunningConfig.Controllers.LoadBalancer != nil {
				t.Errorf("status claims the LoadBalancer controller runs")
			}
		})
	}
}

func TestMergeStatusShowsRunningConfig(t *testing.T) {
	spec := v3.KubeControllersDefaults()
	spec.Controllers.Node.LeakGracePeriod = &metav1.Duration{Duration: time.Minute}
	_, st, err := Merge(envOf(map[string]string{"ENABLED_CONTROLLERS": "node"}), spec)
	if err != nil {
		t.Fatal(err)
	}
	n := st.RunningConfig.Controllers.Node
	if n == nil || n.LeakGracePeriod.Duration != time.Minute || n.SyncLabels != "Enabled" || st.RunningConfig.HealthChecks != "Enabled" {
		t.Errorf("running config %+v / node %+v", st.RunningConfig, n)
	}
	if st.RunningConfig.Controllers.Policy != nil {
		t.Errorf("policy shown running though ENABLED_CONTROLLERS=node")
	}
}

func TestMergeRefuses(t *testing.T) {
	for env, want := range map[string]map[string]string{
		"invalid controller":      {"ENABLED_CONTROLLERS": "node,bogus"},
		"not implemented":         {"ENABLED_CONTROLLERS": "loadbalancer"},
		"not a boolean":           {"HEALTH_ENABLED": "maybe"},
		"not a positive duration": {"RECONCILER_PERIOD": "soon"},
		"unknown log level":       {"LOG_LEVEL": "loud"},
		"host endpoints":          {"AUTO_HOST_ENDPOINTS": "enabled"},
	} {
		_, _, err := Merge(envOf(want), v3.KubeControllersDefaults())
		if err == nil || !strings.Contains(err.Error(), env) {
			t.Errorf("%v: error %v, want %q", want, err, env)
		}
	}
}

// TestMergeStatusAsCalico: the status details Calico's kube-controllers
// writes: DATASTORE_TYPE recorded on the Kubernetes datastore (why labels
// are not synced), host endpoints shown only when configured.
func TestMergeStatusAsCalico(t *testing.T) {
	spec := v3.KubeControllersDefaults()
	spec.Controllers.Node.HostEndpoint = nil
	_, st, err := Merge(envOf(map[string]string{"DATASTORE_TYPE": "kubernetes"}), spec)
	if err != nil {
		t.Fatal(err)
	}
	if st.EnvironmentVars["DATASTORE_TYPE"] != "kubernetes" || st.RunningConfig.Controllers.Node.SyncLabels != "Disabled" {
		t.Errorf("status %+v / %+v", st.EnvironmentVars, st.RunningConfig.Controllers.Node)
	}
	if st.RunningConfig.Controllers.Node.HostEndpoint != nil {
		t.Errorf("host endpoints shown though not configured")
	}
	_, st, _ = Merge(envOf(nil), v3.KubeControllersDefaults())
	if _, ok := st.EnvironmentVars["DATASTORE_TYPE"]; ok || st.RunningConfig.Controllers.Node.HostEndpoint == nil {
		t.Errorf("etcd defaults: env %v, host endpoints %v", st.EnvironmentVars, st.RunningConfig.Controllers.Node.HostEndpoint)
	}
}
