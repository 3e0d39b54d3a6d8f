package v3

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// KindKubeControllersConfiguration is the kind of the single object (named
// "default") that configures the Kubernetes controllers.
const KindKubeControllersConfiguration = "KubeControllersConfiguration"

// KubeControllersConfiguration enables and tunes the controllers of the
// kube-controllers process. Its status is written by that process and shows
// the configuration actually running.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=kubecontrollersconfigurations
// +kubebuilder:subresource:status
type KubeControllersConfiguration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec KubeControllersConfigurationSpec `json:"spec"`
	// Status is written by kube-controllers, not by users.
	// +optional
	Status KubeControllersConfigurationStatus `json:"status,omitzero"`
}

// KubeControllersConfigurationList is a list of KubeControllersConfiguration.
// +kubebuilder:object:root=true
type KubeControllersConfigurationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []KubeControllersConfiguration `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindKubeControllersConfiguration, Plural: "kubecontrollersconfigurations",
		New: func() Resource {
			return &KubeControllersConfiguration{TypeMeta: typeMeta(KindKubeControllersConfiguration)}
		},
		NewList: func() runtimeObject {
			return &KubeControllersConfigurationList{TypeMeta: typeMeta(KindKubeControllersConfiguration + "List")}
		},
	})
}

// ControllerMode turns a controller feature on or off.
// +kubebuilder:validation:Enum=Disabled;Enabled
type ControllerMode string

// Values of ControllerMode.
const (
	ControllerDisabled ControllerMode = "Disabled"
	ControllerEnabled  ControllerMode = "Enabled"
)

// KubeControllersConfigurationSpec holds the kube-controllers settings.
// Field names, JSON names and types follow Calico's projectcalico.org/v3
// KubeControllersConfigurationSpec.
type KubeControllersConfigurationSpec struct {
	// LogSeverityScreen is the lowest severity logged to stdout: None, Debug,
	// Info, Warning, Error, Fatal or Panic. [Default: Info]
	// +kubebuilder:validation:Enum=None;Debug;Info;Warning;Error;Fatal;Panic
	LogSeverityScreen string `json:"logSeverityScreen,omitempty"`
	// HealthChecks turns the health checks on or off. [Default: Enabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	// +kubebuilder:default=Enabled
	HealthChecks string `json:"healthChecks,omitempty"`
	// EtcdV3CompactionPeriod is the interval between etcd compactions; 0
	// disables them. [Default: 10m]
	EtcdV3CompactionPeriod *metav1.Duration `json:"etcdV3CompactionPeriod,omitempty"`
	// PrometheusMetricsPort is the TCP port of the metrics server; 0
	// disables it. [Default: 9094]
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	PrometheusMetricsPort *int `json:"prometheusMetricsPort,omitempty"`
	// Controllers enables and configures the individual controllers; a
	// controller left out is disabled.
	Controllers ControllersConfig `json:"controllers"`
	// DebugProfilePort, if set, serves CPU and memory profiles on this port.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=65535
	// +optional
	DebugProfilePort *int32 `json:"debugProfilePort,omitempty"`
}

// ControllersConfig enables (by being present) and configures each
// controller.
type ControllersConfig struct {
	// Node enables the node controller, which cleans up after deleted nodes
	// and can create host endpoints for nodes.
	Node *NodeControllerConfig `json:"node,omitempty"`
	// Policy enables the network policy controller (etcd datastore only).
	Policy *PolicyControllerConfig `json:"policy,omitempty"`
	// WorkloadEndpoint enables the workload endpoint controller (etcd
	// datastore only).
	WorkloadEndpoint *WorkloadEndpointControllerConfig `json:"workloadEndpoint,omitempty"`
	// ServiceAccount enables the service account controller (etcd datastore
	// only).
	ServiceAccount *ServiceAccountControllerConfig `json:"serviceAccount,omitempty"`
	// Namespace enables the namespace controller (etcd datastore only).
	Namespace *NamespaceControllerConfig `json:"namespace,omitempty"`
	// LoadBalancer enables the controller that assigns LoadBalancer service
	// IPs from Calico IPAM.
	LoadBalancer *LoadBalancerControllerConfig `json:"loadBalancer,omitempty"`
	// Migration enables the migration controllers.
	Migration *MigrationControllerConfig `json:"policyMigration,omitempty"`
}

// MigrationControllerConfig configures the migration controllers.
type MigrationControllerConfig struct {
	// PolicyNameMigrator turns on the migration of old-style policy names to
	// v3 names. [Default: Enabled]
	// +kubebuilder:default=Enabled
	PolicyNameMigrator ControllerMode `json:"enabled,omitempty"`
}

// NodeControllerConfig configures the node controller.
type NodeControllerConfig struct {
	// ReconcilerPeriod is the interval between full reconciliations with the
	// datastore. [Default: 5m]
	ReconcilerPeriod *metav1.Duration `json:"reconcilerPeriod,omitempty"`
	// SyncLabels copies Kubernetes node labels to Calico nodes (etcd
	// datastore). [Default: Enabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	SyncLabels string `json:"syncLabels,omitempty"`
	// HostEndpoint configures automatic host endpoints; unset leaves them
	// disabled.
	HostEndpoint *AutoHostEndpointConfig `json:"hostEndpoint,omitempty"`
	// LeakGracePeriod is how long an IP must look unused before it is
	// reclaimed as leaked; 0 disables IP garbage collection. [Default: 15m]
	// +optional
	LeakGracePeriod *metav1.Duration `json:"leakGracePeriod,omitempty"`
}

// AutoHostEndpointConfig configures the host endpoints the node controller
// creates.
type AutoHostEndpointConfig struct {
	// AutoCreate turns on automatic host endpoints. [Default: Disabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	AutoCreate string `json:"autoCreate,omitempty"`
	// CreateDefaultHostEndpoint says whether a default ("*") host endpoint
	// is created for each node. [Default: Enabled]
	// +kubebuilder:validation:Enum=Enabled;Disabled
	CreateDefaultHostEndpoint DefaultHostEndpointMode `json:"createDefaultHostEndpoint,omitempty"`
	// Templates describe additional host endpoints to create.
	Templates []Template `json:"templates,omitempty"`
}

// DefaultHostEndpointMode turns the per-node default host endpoint on or off.
type DefaultHostEndpointMode string

// Values of DefaultHostEndpointMode.
const (
	DefaultHostEndpointsEnabled  DefaultHostEndpointMode = "Enabled"
	DefaultHostEndpointsDisabled DefaultHostEndpointMode = "Disabled"
)

// Template describes host endpoints created for the selected nodes.
type Template struct {
	// GenerateName is appended to the generated host endpoint names; it must
	// be unique among the templates.
	// +kubebuilder:validation:MaxLength=253
	GenerateName string `json:"generateName,omitempty"`
	// InterfaceCIDRs limits the host endpoint's expected IPs to node
	// addresses within these CIDRs.
	// +listType=set
	InterfaceCIDRs []string `json:"interfaceCIDRs,omitempty"`
	// InterfacePattern is a regular expression; a host endpoint is created
	// for each matching interface of each selected node. At least one of
	// InterfaceCIDRs and InterfacePattern must be set.
	InterfacePattern string `json:"interfacePattern,omitempty"`
	// Labels are added to the generated host endpoints (overriding node
	// labels of the same name).
	Labels map[string]string `json:"labels,omitempty"`
	// NodeSelector selects the nodes the template applies to; empty selects
	// all nodes.
	NodeSelector string `json:"nodeSelector,omitempty"`
}

// PolicyControllerConfig configures the network policy controller.
type PolicyControllerConfig struct {
	// ReconcilerPeriod is the interval between full reconciliations.
	// [Default: 5m]
	ReconcilerPeriod *metav1.Duration `json:"reconcilerPeriod,omitempty"`
}

// WorkloadEndpointControllerConfig configures the workload endpoint
// controller.
type WorkloadEndpointControllerConfig struct {
	// ReconcilerPeriod is the interval between full reconciliations.
	// [Default: 5m]
	ReconcilerPeriod *metav1.Duration `json:"reconcilerPeriod,omitempty"`
}

// ServiceAccountControllerConfig configures the service account controller.
type ServiceAccountControllerConfig struct {
	// ReconcilerPeriod is the interval between full reconciliations.
	// [Default: 5m]
	ReconcilerPeriod *metav1.Duration `json:"reconcilerPeriod,omitempty"`
}

// NamespaceControllerConfig configures the namespace controller.
type NamespaceControllerConfig struct {
	// ReconcilerPeriod is the interval between full reconciliations.
	// [Default: 5m]
	ReconcilerPeriod *metav1.Duration `json:"reconcilerPeriod,omitempty"`
}

// LoadBalancerControllerConfig configures the LoadBalancer IP controller.
type LoadBalancerControllerConfig struct {
	// AssignIPs selects which LoadBalancer services get IPs from Calico
	// IPAM. [Default: AllServices]
	// +kubebuilder:default=AllServices
	AssignIPs AssignIPs `json:"assignIPs,omitempty"`
}

// AssignIPs selects the LoadBalancer services that get Calico IPs.
// +kubebuilder:validation:Enum=AllServices;RequestedServicesOnly
type AssignIPs string

// Values of AssignIPs.
const (
	AllServices           AssignIPs = "AllServices"
	RequestedServicesOnly AssignIPs = "RequestedServicesOnly"
)

// KubeControllersConfigurationStatus shows the configuration kube-controllers
// is running with, after environment variables were applied.
type KubeControllersConfigurationStatus struct {
	// RunningConfig is the effective configuration.
	// +optional
	RunningConfig *KubeControllersConfigurationSpec `json:"runningConfig,omitempty"`
	// EnvironmentVars are the environment variables that influenced
	// RunningConfig.
	EnvironmentVars map[string]string `json:"environmentVars,omitempty"`
}

// Default implements Resource. It does what Calico's client does on create
// and update: prometheusMetricsPort 9094, the node controller's
// leakGracePeriod 15m and the LoadBalancer controller's assignIPs
// AllServices, each only when unset. Controllers left out stay disabled.
// The full default object is KubeControllersDefaults.
func (c *KubeControllersConfiguration) Default() {
	s := &c.Spec
	// The CRD schema defaults these too: keep both datastores identical.
	if s.HealthChecks == "" {
		s.HealthChecks = "Enabled"
	}
	if m := s.Controllers.Migration; m != nil && m.PolicyNameMigrator == "" {
		m.PolicyNameMigrator = ControllerEnabled
	}
	if s.PrometheusMetricsPort == nil {
		s.PrometheusMetricsPort = new(9094)
	}
	if n := s.Controllers.Node; n != nil && n.LeakGracePeriod == nil {
		n.LeakGracePeriod = &metav1.Duration{Duration: 15 * time.Minute}
	}
	if lb := s.Controllers.LoadBalancer; lb != nil && lb.AssignIPs == "" {
		lb.AssignIPs = AllServices
	}
}

// KubeControllersDefaults returns the spec of the "default"
// KubeControllersConfiguration that kube-controllers creates when none
// exists (Calico's kube-controllers/pkg/config NewDefaultKubeControllersConfig,
// plus the prometheusMetricsPort 9094 that the client adds on create): every
// controller enabled, reconciliation every 5m, etcd compaction every 10m,
// node labels synced, automatic host endpoints off, IP leak grace period 15m,
// LoadBalancer IPs for all services, policy name migration on.
//
// Each call returns a fresh value; callers may modify it.
func KubeControllersDefaults() KubeControllersConfigurationSpec {
	d := func(x time.Duration) *metav1.Duration { return &metav1.Duration{Duration: x} }
	const reconcile = 5 * time.Minute
	return KubeControllersConfigurationSpec{
		LogSeverityScreen:      "Info",
		HealthChecks:           "Enabled",
		EtcdV3CompactionPeriod: d(10 * time.Minute),
		PrometheusMetricsPort:  new(9094),
		Controllers: ControllersConfig{
			Node: &NodeControllerConfig{
				ReconcilerPeriod: d(reconcile),
				SyncLabels:       "Enabled",
				HostEndpoint: &AutoHostEndpointConfig{
					AutoCreate:                "Disabled",
					CreateDefaultHostEndpoint: DefaultHostEndpointsEnabled,
				},
				LeakGracePeriod: d(15 * time.Minute),
			},
			Policy:           &PolicyControllerConfig{ReconcilerPeriod: d(reconcile)},
			WorkloadEndpoint: &WorkloadEndpointControllerConfig{ReconcilerPeriod: d(reconcile)},
			ServiceAccount:   &ServiceAccountControllerConfig{ReconcilerPeriod: d(reconcile)},
			Namespace:        &NamespaceControllerConfig{ReconcilerPeriod: d(reconcile)},
			LoadBalancer:     &LoadBalancerControllerConfig{AssignIPs: AllServices},
			Migration:        &MigrationControllerConfig{PolicyNameMigrator: ControllerEnabled},
		},
	}
}
