package daemon

import (
	"strings"
	"testing"
	"time"
)

func TestFromEnv(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := FromEnv(env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr() != ":5473" || c.HealthPort != 9098 || c.PrometheusMetricsPort != 9093 || c.DatastoreType != "etcdv3" ||
		c.MaxFallBehind != 300*time.Second || c.TLS.Set() {
		t.Errorf("defaults: %+v", c)
	}
	c, err = FromEnv(env(map[string]string{"TYPHA_DATASTORETYPE": "kubernetes", "TYPHA_SERVERPORT": "6000",
		"TYPHA_SERVERPINGINTERVALSECS": "2.5", "TYPHA_CLIENTCN": "calico-node", "TYPHA_CONNECTIONREBALANCINGMODE": "none"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.ListenAddr() != ":6000" || c.PingInterval != 2500*time.Millisecond || c.TLS.CN != "calico-node" || !c.TLS.Set() {
		t.Errorf("set: %+v", c)
	}
	c, err = FromEnv(env(map[string]string{"TYPHA_CONNECTIONREBALANCINGMODE": "Kubernetes", "TYPHA_SHUTDOWNTIMEOUTSECS": "60",
		"TYPHA_MAXCONNECTIONSLOWERLIMIT": "2", "TYPHA_K8SSERVICENAME": "typha"}))
	r := c.Rebalance
	if err != nil || r.Mode != "kubernetes" || r.ShutdownTimeout != time.Minute || r.MaxConnsLower != 2 || r.MaxConnsUpper != 10000 ||
		r.K8sServiceName != "typha" || r.K8sPortName != "calico-typha" || r.DropInterval != time.Second {
		t.Errorf("rebalancing: %+v %v", r, err)
	}
	for k, v := range map[string]string{"TYPHA_CONNECTIONREBALANCINGMODE": "random", "TYPHA_SERVERPORT": "x",
		"TYPHA_DATASTORETYPE": "consul", "TYPHA_HEALTHENABLED": "maybe"} {
		if _, err := FromEnv(env(map[string]string{k: v})); err == nil || !strings.Contains(err.Error(), k) {
			t.Errorf("%s=%s: %v", k, v, err)
		}
	}
}
