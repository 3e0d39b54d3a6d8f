// Package config is kube-controllers' configuration, as Calico's: the
// environment (LOG_LEVEL, ENABLED_CONTROLLERS, RECONCILER_PERIOD,
// HEALTH_ENABLED, SYNC_NODE_LABELS, AUTO_HOST_ENDPOINTS,
// COMPACTION_PERIOD, DATASTORE_TYPE, KUBECONFIG) merged over the
// KubeControllersConfiguration "default", which is created with Calico's
// defaults when missing and whose status shows the configuration running.
// Merge is pure; Load and Changed talk to the datastore.
package config

import (
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Calico's environment variables.
const (
	EnvLogLevel           = "LOG_LEVEL"
	EnvReconcilerPeriod   = "RECONCILER_PERIOD"
	EnvEnabledControllers = "ENABLED_CONTROLLERS"
	EnvCompactionPeriod   = "COMPACTION_PERIOD"
	EnvHealthEnabled      = "HEALTH_ENABLED"
	EnvSyncNodeLabels     = "SYNC_NODE_LABELS"
	EnvAutoHostEndpoints  = "AUTO_HOST_ENDPOINTS"
	EnvDatastoreType      = "DATASTORE_TYPE"
	EnvKubeconfig         = "KUBECONFIG"
)

// AllEnvs are the variables recorded in the status when set.
var AllEnvs = []string{EnvLogLevel, EnvReconcilerPeriod, EnvEnabledControllers, EnvCompactionPeriod,
	EnvHealthEnabled, EnvSyncNodeLabels, EnvAutoHostEndpoints}

// Datastore types, as Calico spells them.
const (
	DatastoreEtcd       = "etcdv3"
	DatastoreKubernetes = "kubernetes"
)

// DefaultName is the one KubeControllersConfiguration kube-controllers reads.
const DefaultName = "default"

const defaultReconcile = 5 * time.Minute

// Env is the process environment that matters: the set variables only.
type Env struct {
	Vars map[string]string
	// DatastoreType is DATASTORE_TYPE, default etcdv3 as Calico's.
	DatastoreType string
	Kubeconfig    string
}

// FromEnv reads Env through getenv.
func FromEnv(getenv func(string) string) Env {
	e := Env{Vars: map[string]string{}, DatastoreType: DatastoreEtcd, Kubeconfig: getenv(EnvKubeconfig)}
	for _, k := range AllEnvs {
		if v := getenv(k); v != "" {
			e.Vars[k] = v
		}
	}
	if v := getenv(EnvDatastoreType); v != "" {
		e.DatastoreType = v
		e.Vars[EnvDatastoreType] = v
	}
	return e
}

// Etcd says whether the Calico datastore is etcd (the policy, namespace,
// service-account and workload-endpoint controllers only run there).
func (e Env) Etcd() bool { return e.DatastoreType != DatastoreKubernetes }

// RunConfig is the configuration the controllers run with.
type RunConfig struct {
	LogLevel               slog.Level
	Controllers            Controllers
	EtcdV3CompactionPeriod time.Duration
	HealthEnabled          bool
	PrometheusPort         int
	DebugProfilePort       int32
}

// Controllers: a nil entry is a controller that does not run.
type Controllers struct {
	Node             *NodeConfig
	Policy           *GenericConfig
	WorkloadEndpoint *GenericConfig
	ServiceAccount   *GenericConfig
	Namespace        *GenericConfig
}

// GenericConfig tunes a mirroring controller.
type GenericConfig struct {
	// ReconcilerPeriod is how often the whole datastore is compared with
	// Kubernetes (drift made by others is repaired).
	ReconcilerPeriod time.Duration
}

// NodeConfig tunes the node controller and IPAM garbage collection.
type NodeConfig struct {
	// DeleteNodes: a deleted Kubernetes Node's Calico Node and
	// WorkloadEndpoints are deleted (etcd; in Kubernetes mode the Calico
	// Node is the Kubernetes Node).
	DeleteNodes bool
	// SyncLabels copies Kubernetes node labels to Calico nodes (etcd).
	SyncLabels bool
	// LeakGracePeriod is how long an address must look unused before it
	// is reclaimed; 0 turns leak collection off (a deleted node's
	// addresses are still reclaimed, as Calico does).
	LeakGracePeriod time.Duration
	// ReconcilerPeriod is the interval between IPAM GC passes.
	ReconcilerPeriod time.Duration
}

// Merge combines the environment with the stored spec (the environment
// wins, as in Calico) and returns the running configuration and the
// status that shows it. Invalid environment values, and controllers Tabby
// does not have, are refused.
func Merge(env Env, spec v3.KubeControllersConfigurationSpec) (RunConfig, v3.KubeControllersConfigurationStatus, error) {
	var rc RunConfig
	st := v3.KubeControllersConfigurationStatus{EnvironmentVars: map[string]string{}, RunningConfig: &v3.KubeControllersConfigurationSpec{}}
	run := st.RunningConfig
	rec := func(k string) (string, bool) {
		v, ok := env.Vars[k]
		if ok {
			st.EnvironmentVars[k] = v
		}
		return v, ok
	}

	// Log level.
	level := spec.LogSeverityScreen
	if v, ok := rec(EnvLogLevel); ok {
		level = v
	}
	l, name, err := parseLevel(level)
	if err != nil {
		if _, fromEnv := env.Vars[EnvLogLevel]; fromEnv {
			return rc, st, fmt.Errorf("%s=%q: %w", EnvLogLevel, level, err)
		}
		l, name = slog.LevelInfo, "Info" // as Calico: a bad stored level falls back to Info
	}
	rc.LogLevel, run.LogSeverityScreen = l, name

	// Enabled controllers.
	c := &rc.Controllers
	sc := &run.Controllers
	ac := spec.Controllers
	if v, ok := rec(EnvEnabledControllers); ok {
		for _, name := range strings.Split(v, ",") {
			switch strings.TrimSpace(name) {
			case "node":
				c.Node, sc.Node = &NodeConfig{}, &v3.NodeControllerConfig{}
			case "policy":
				c.Policy, sc.Policy = &GenericConfig{}, &v3.PolicyControllerConfig{}
			case "workloadendpoint":
				c.WorkloadEndpoint, sc.WorkloadEndpoint = &GenericConfig{}, &v3.WorkloadEndpointControllerConfig{}
			case "serviceaccount":
				c.ServiceAccount, sc.ServiceAccount = &GenericConfig{}, &v3.ServiceAccountControllerConfig{}
			case "namespace", "profile":
				c.Namespace, sc.Namespace = &GenericConfig{}, &v3.NamespaceControllerConfig{}
			case "":
			case "loadbalancer", "flannelmigration":
				return rc, st, fmt.Errorf("%s: controller %q is not implemented by Tabby", EnvEnabledControllers, name)
			default:
				return rc, st, fmt.Errorf("%s: invalid controller %q (node, policy, workloadendpoint, serviceaccount, namespace)", EnvEnabledControllers, name)
			}
		}
	} else {
		if ac.Node != nil {
			c.Node, sc.Node = &NodeConfig{}, &v3.NodeControllerConfig{}
		}
		if ac.Policy != nil {
			c.Policy, sc.Policy = &GenericConfig{}, &v3.PolicyControllerConfig{}
		}
		if ac.WorkloadEndpoint != nil {
			c.WorkloadEndpoint, sc.WorkloadEndpoint = &GenericConfig{}, &v3.WorkloadEndpointControllerConfig{}
		}
		if ac.ServiceAccount != nil {
			c.ServiceAccount, sc.ServiceAccount = &GenericConfig{}, &v3.ServiceAccountControllerConfig{}
		}
		if ac.Namespace != nil {
			c.Namespace, sc.Namespace = &GenericConfig{}, &v3.NamespaceControllerConfig{}
		}
		// The LoadBalancer controller (in Calico's default object) is not
		// implemented: it does not run, and the status says so by leaving
		// it out.
	}
	period := func(d *metav1.Duration) time.Duration {
		if d == nil {
			return defaultReconcile
		}
		return d.Duration
	}
	if c.Policy != nil && ac.Policy != nil {
		c.Policy.ReconcilerPeriod, sc.Policy.ReconcilerPeriod = period(ac.Policy.ReconcilerPeriod), ac.Policy.ReconcilerPeriod
	}
	if c.WorkloadEndpoint != nil && ac.WorkloadEndpoint != nil {
		c.WorkloadEndpoint.ReconcilerPeriod, sc.WorkloadEndpoint.ReconcilerPeriod = period(ac.WorkloadEndpoint.ReconcilerPeriod), ac.WorkloadEndpoint.ReconcilerPeriod
	}
	if c.ServiceAccount != nil && ac.ServiceAccount != nil {
		c.ServiceAccount.ReconcilerPeriod, sc.ServiceAccount.ReconcilerPeriod = period(ac.ServiceAccount.ReconcilerPeriod), ac.ServiceAccount.ReconcilerPeriod
	}
	if c.Namespace != nil && ac.Namespace != nil {
		c.Namespace.ReconcilerPeriod, sc.Namespace.ReconcilerPeriod = period(ac.Namespace.ReconcilerPeriod), ac.Namespace.ReconcilerPeriod
	}
	for _, g := range []*GenericConfig{c.Policy, c.WorkloadEndpoint, c.ServiceAccount, c.Namespace} {
		if g != nil && g.ReconcilerPeriod == 0 {
			g.ReconcilerPeriod = defaultReconcile
		}
	}
	if v, ok := rec(EnvReconcilerPeriod); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return rc, st, fmt.Errorf("%s=%q: not a positive duration", EnvReconcilerPeriod, v)
		}
		md := &metav1.Duration{Duration: d}
		if c.Policy != nil {
			c.Policy.ReconcilerPeriod, sc.Policy.ReconcilerPeriod = d, md
		}
		if c.WorkloadEndpoint != nil {
			c.WorkloadEndpoint.ReconcilerPeriod, sc.WorkloadEndpoint.ReconcilerPeriod = d, md
		}
		if c.ServiceAccount != nil {
			c.ServiceAccount.ReconcilerPeriod, sc.ServiceAccount.ReconcilerPeriod = d, md
		}
		if c.Namespace != nil {
			c.Namespace.ReconcilerPeriod, sc.Namespace.ReconcilerPeriod = d, md
		}
	}

	// Compaction period.
	rc.EtcdV3CompactionPeriod = 10 * time.Minute
	if spec.EtcdV3CompactionPeriod != nil {
		rc.EtcdV3CompactionPeriod = spec.EtcdV3CompactionPeriod.Duration
	}
	if v, ok := rec(EnvCompactionPeriod); ok {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return rc, st, fmt.Errorf("%s=%q: not a duration", EnvCompactionPeriod, v)
		}
		rc.EtcdV3CompactionPeriod = d
	}
	run.EtcdV3CompactionPeriod = &metav1.Duration{Duration: rc.EtcdV3CompactionPeriod}

	// Health.
	rc.HealthEnabled = spec.HealthChecks != "Disabled"
	if v, ok := rec(EnvHealthEnabled); ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return rc, st, fmt.Errorf("%s=%q: not a boolean", EnvHealthEnabled, v)
		}
		rc.HealthEnabled = b
	}
	run.HealthChecks = enabled(rc.HealthEnabled)

	if spec.PrometheusMetricsPort != nil {
		rc.PrometheusPort = *spec.PrometheusMetricsPort
		run.PrometheusMetricsPort = new(rc.PrometheusPort)
	}
	if spec.DebugProfilePort != nil {
		rc.DebugProfilePort = *spec.DebugProfilePort
		run.DebugProfilePort = new(rc.DebugProfilePort)
	}

	if n := c.Node; n != nil {
		if err := mergeNode(env, spec, n, sc.Node, rec); err != nil {
			return rc, st, err
		}
	}
	return rc, st, nil
}

func mergeNode(env Env, spec v3.KubeControllersConfigurationSpec, n *NodeConfig, sn *v3.NodeControllerConfig, rec func(string) (string, bool)) error {
	an := spec.Controllers.Node
	if !env.Etcd() {
		// As Calico: labels are not synced on the Kubernetes datastore,
		// and the status says why.
		rec(EnvDatastoreType)
	}
	if env.Etcd() {
		n.DeleteNodes = true
		n.SyncLabels = an == nil || an.SyncLabels != "Disabled"
		if v, ok := rec(EnvSyncNodeLabels); ok {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("%s=%q: not a boolean", EnvSyncNodeLabels, v)
			}
			n.SyncLabels = b
		}
	}
	sn.SyncLabels = enabled(n.SyncLabels)
	auto := an != nil && an.HostEndpoint != nil && an.HostEndpoint.AutoCreate == "Enabled"
	shown := an != nil && an.HostEndpoint != nil
	if v, ok := rec(EnvAutoHostEndpoints); ok {
		shown = true
		switch strings.ToLower(v) {
		case "enabled":
			auto = true
		case "disabled":
			auto = false
		default:
			return fmt.Errorf("%s=%q: Enabled or Disabled", EnvAutoHostEndpoints, v)
		}
	}
	if auto {
		return fmt.Errorf("automatic host endpoints (node controller hostEndpoint.autoCreate) are not implemented by Tabby")
	}
	if shown {
		sn.HostEndpoint = &v3.AutoHostEndpointConfig{AutoCreate: "Disabled", CreateDefaultHostEndpoint: v3.DefaultHostEndpointsEnabled}
	}
	if an != nil && an.LeakGracePeriod != nil {
		n.LeakGracePeriod = an.LeakGracePeriod.Duration
		sn.LeakGracePeriod = &metav1.Duration{Duration: n.LeakGracePeriod}
	}
	n.ReconcilerPeriod = defaultReconcile
	if an != nil && an.ReconcilerPeriod != nil && an.ReconcilerPeriod.Duration > 0 {
		n.ReconcilerPeriod = an.ReconcilerPeriod.Duration
	}
	return nil
}

func enabled(b bool) string {
	if b {
		return "Enabled"
	}
	return "Disabled"
}

// parseLevel reads Calico's level names (any case) and "warn".
func parseLevel(s string) (slog.Level, string, error) {
	switch strings.ToLower(s) {
	case "debug", "trace":
		return slog.LevelDebug, "Debug", nil
	case "info", "":
		return slog.LevelInfo, "Info", nil
	case "warning", "warn":
		return slog.LevelWarn, "Warning", nil
	case "error", "fatal", "panic":
		return slog.LevelError, strings.ToUpper(s[:1]) + strings.ToLower(s[1:]), nil
	case "none":
		return slog.LevelError + 4, "None", nil
	}
	return 0, "", fmt.Errorf("unknown log level %q (Debug, Info, Warning, Error, Fatal, Panic, None)", s)
}
