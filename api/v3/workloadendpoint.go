package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindWorkloadEndpoint is the kind of a workload's (pod's) network interface.
const KindWorkloadEndpoint = "WorkloadEndpoint"

// WorkloadEndpoint is a workload's network interface on a node: its
// addresses, host-side interface, profiles and named ports. The CNI plugin
// writes one per pod interface.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,path=workloadendpoints
type WorkloadEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec WorkloadEndpointSpec `json:"spec,omitempty"`
}

// WorkloadEndpointSpec is the content of a WorkloadEndpoint.
type WorkloadEndpointSpec struct {
	// Orchestrator is the name of the orchestrator ("k8s").
	Orchestrator string `json:"orchestrator,omitempty"`
	// Workload is the name of the workload.
	Workload string `json:"workload,omitempty"`
	// Node is the name of the node the endpoint is on.
	Node string `json:"node,omitempty"`
	// ContainerID is the ID of the workload's container.
	ContainerID string `json:"containerID,omitempty"`
	// Pod is the name of the pod.
	Pod string `json:"pod,omitempty"`
	// Endpoint is the name of the endpoint within the workload ("eth0").
	Endpoint string `json:"endpoint,omitempty"`
	// ServiceAccountName is the pod's Kubernetes service account.
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// IPNetworks are the single addresses (/32 or /128) given to the
	// endpoint; packets may only leave it from these.
	IPNetworks []string `json:"ipNetworks,omitempty"`
	// IPNATs are 1:1 NAT mappings to the endpoint; each internal IP must be
	// one of IPNetworks.
	IPNATs []IPNAT `json:"ipNATs,omitempty"`
	// IPv4Gateway is the IPv4 gateway address for the workload's traffic.
	IPv4Gateway string `json:"ipv4Gateway,omitempty"`
	// IPv6Gateway is the IPv6 gateway address for the workload's traffic.
	IPv6Gateway string `json:"ipv6Gateway,omitempty"`
	// Profiles are applied, in order, after the tiers of policy.
	Profiles []string `json:"profiles,omitempty"`
	// InterfaceName is the host side of the endpoint's veth, e.g.
	// "cali0123456789a".
	InterfaceName string `json:"interfaceName,omitempty"`
	// MAC is the MAC address of the endpoint's interface.
	MAC string `json:"mac,omitempty"`
	// Ports are the endpoint's named and host-mapped ports.
	Ports []WorkloadEndpointPort `json:"ports,omitempty"`
	// AllowSpoofedSourcePrefixes are CIDRs the endpoint may send from
	// although they are not its own (bypassing the RPF check).
	AllowSpoofedSourcePrefixes []string `json:"allowSpoofedSourcePrefixes,omitempty"`
	// QoSControls limit the endpoint's bandwidth, packet rate and
	// connections, and set its DSCP.
	QoSControls *QoSControls `json:"qosControls,omitempty"`
}

// WorkloadEndpointPort is a named or host-mapped port of a workload.
type WorkloadEndpointPort struct {
	// Name is the port's name, as used in rules; may be empty for a port
	// that only maps a host port.
	Name string `json:"name"`
	// Protocol is the port's protocol (one with ports).
	Protocol numorstring.Protocol `json:"protocol"`
	// Port is the port number in the workload.
	Port uint16 `json:"port"`
	// HostPort is the port on the host mapped to Port (0: none).
	HostPort uint16 `json:"hostPort"`
	// HostIP is the host address the host port listens on (empty: all).
	HostIP string `json:"hostIP"`
}

// IPNAT is a 1:1 NAT mapping of an external address to one of the
// endpoint's own addresses.
type IPNAT struct {
	// InternalIP is the endpoint's address (one of its IPNetworks).
	InternalIP string `json:"internalIP"`
	// ExternalIP is the address mapped to InternalIP.
	ExternalIP string `json:"externalIP"`
}

// QoSControls are an endpoint's quality-of-service limits. A zero value
// means no limit; the burst and minburst sizes have defaults when zero.
type QoSControls struct {
	// IngressBandwidth limits ingress to this many bits per second
	// (1000-10^15).
	IngressBandwidth int64 `json:"ingressBandwidth,omitempty"`
	// IngressBurst is the ingress burst size in bits (1000-34359738360;
	// 0: 4Gi).
	IngressBurst int64 `json:"ingressBurst,omitempty"`
	// IngressPeakrate limits ingress bursts to this many bits per second
	// (1010-1.01x10^15; 0: line rate).
	IngressPeakrate int64 `json:"ingressPeakrate,omitempty"`
	// IngressMinburst is the ingress minimum burst in bytes (1000-10^8;
	// 0: the interface MTU).
	IngressMinburst int64 `json:"ingressMinburst,omitempty"`
	// EgressBandwidth limits egress to this many bits per second
	// (1000-10^15).
	EgressBandwidth int64 `json:"egressBandwidth,omitempty"`
	// EgressBurst is the egress burst size in bits (1000-34359738360;
	// 0: 4Gi).
	EgressBurst int64 `json:"egressBurst,omitempty"`
	// EgressPeakrate limits egress bursts to this many bits per second
	// (1010-1.01x10^15; 0: line rate).
	EgressPeakrate int64 `json:"egressPeakrate,omitempty"`
	// EgressMinburst is the egress minimum burst in bytes (1000-10^8;
	// 0: the interface MTU).
	EgressMinburst int64 `json:"egressMinburst,omitempty"`
	// IngressPacketRate limits ingress to this many packets per second
	// (1-10^4).
	IngressPacketRate int64 `json:"ingressPacketRate,omitempty"`
	// IngressPacketBurst is the ingress packet burst (1-10^4; 0: 5).
	IngressPacketBurst int64 `json:"ingressPacketBurst,omitempty"`
	// EgressPacketRate limits egress to this many packets per second
	// (1-10^4).
	EgressPacketRate int64 `json:"egressPacketRate,omitempty"`
	// EgressPacketBurst is the egress packet burst (1-10^4; 0: 5).
	EgressPacketBurst int64 `json:"egressPacketBurst,omitempty"`
	// IngressMaxConnections limits concurrent ingress connections
	// (1-4294967295).
	IngressMaxConnections int64 `json:"ingressMaxConnections,omitempty"`
	// EgressMaxConnections limits concurrent egress connections
	// (1-4294967295).
	EgressMaxConnections int64 `json:"egressMaxConnections,omitempty"`
	// DSCP marks the endpoint's egress packets: a number 0-63 or a name
	// (DF, EF, AF11-AF43, CS0-CS6).
	DSCP *intstr.IntOrString `json:"dscp,omitempty"`
}

// WorkloadEndpointList is a list of WorkloadEndpoint.
// +kubebuilder:object:root=true
type WorkloadEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []WorkloadEndpoint `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindWorkloadEndpoint, Plural: "workloadendpoints", Namespaced: true,
		New:     func() Resource { return &WorkloadEndpoint{TypeMeta: typeMeta(KindWorkloadEndpoint)} },
		NewList: func() runtimeObject { return &WorkloadEndpointList{TypeMeta: typeMeta(KindWorkloadEndpoint + "List")} },
	})
}

// Default implements Resource: an endpoint written without a name gets the
// one its spec implies, as Calico's client names it.
func (w *WorkloadEndpoint) Default() {
	if w.Name == "" {
		if name, errs := w.Spec.ExpectedName(); len(errs) == 0 {
			w.Name = name
		}
	}
}
