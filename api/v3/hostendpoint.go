package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindHostEndpoint is the kind of a host's network interface under policy.
const KindHostEndpoint = "HostEndpoint"

// HostEndpoint puts one interface of a node (or, with interfaceName "*",
// all of the host's own traffic) under Calico policy.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=hostendpoints
type HostEndpoint struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec HostEndpointSpec `json:"spec,omitempty"`
}

// HostEndpointSpec is the content of a HostEndpoint.
type HostEndpointSpec struct {
	// Node is the name of the node the interface is on.
	Node string `json:"node,omitempty"`
	// InterfaceName is the Linux interface to police, "*" for all traffic
	// to, from and through the host's default network namespace, or empty
	// to find the interface by ExpectedIPs.
	InterfaceName string `json:"interfaceName,omitempty"`
	// ExpectedIPs are the interface's addresses. They stand for the
	// endpoint when policy selectors match it, and find the interface when
	// InterfaceName is empty.
	// +listType=set
	ExpectedIPs []string `json:"expectedIPs,omitempty"`
	// Profiles are applied, in order, after the tiers of policy.
	// +listType=set
	Profiles []string `json:"profiles,omitempty"`
	// Ports are the endpoint's named ports, for policy rules to refer to.
	Ports []EndpointPort `json:"ports,omitempty"`
}

// EndpointPort is a named port of a host endpoint.
type EndpointPort struct {
	// Name is the port's name, as used in rules.
	Name string `json:"name"`
	// Protocol is the port's protocol (one with ports: TCP, UDP, SCTP,
	// UDPLite).
	Protocol numorstring.Protocol `json:"protocol"`
	// Port is the port number.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port uint16 `json:"port"`
}

// HostEndpointList is a list of HostEndpoint.
// +kubebuilder:object:root=true
type HostEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []HostEndpoint `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindHostEndpoint, Plural: "hostendpoints",
		New:     func() Resource { return &HostEndpoint{TypeMeta: typeMeta(KindHostEndpoint)} },
		NewList: func() runtimeObject { return &HostEndpointList{TypeMeta: typeMeta(KindHostEndpoint + "List")} },
	})
}

// Default implements Resource; HostEndpoint has no defaults.
func (h *HostEndpoint) Default() {}

// Validate implements Resource.
func (h *HostEndpoint) Validate() ErrorList {
	errs := validateMeta(&h.ObjectMeta, false)
	s := &h.Spec
	sp := Path("spec")
	if s.Node == "" {
		errs.Add(sp.Child("node"), "is required: name the node the interface is on")
	} else {
		polCheckName(sp.Child("node"), s.Node, &errs)
	}
	if s.InterfaceName == "" && len(s.ExpectedIPs) == 0 {
		errs.Add(sp.Child("interfaceName"), "set interfaceName, expectedIPs or both: one is needed to find the interface")
	}
	if s.InterfaceName != "" && s.InterfaceName != "*" && !polInterfaceRE().MatchString(s.InterfaceName) {
		errs.Addf(sp.Child("interfaceName"), "%q is not an interface name: use \"*\" or 1-15 of letters, digits, '_', '.' and '-'", s.InterfaceName)
	}
	for i, ip := range s.ExpectedIPs {
		validateIP(sp.Child("expectedIPs").Index(i), ip, &errs)
	}
	for i, prof := range s.Profiles {
		polCheckName(sp.Child("profiles").Index(i), prof, &errs)
	}
	for i := range s.Ports {
		pp := sp.Child("ports").Index(i)
		port := &s.Ports[i]
		if port.Name == "" {
			errs.Add(pp.Child("name"), "is required")
		} else {
			polCheckPortName(pp.Child("name"), port.Name, &errs)
		}
		polCheckEndpointProtocol(pp.Child("protocol"), port.Protocol, &errs)
		if port.Port == 0 {
			errs.Add(pp.Child("port"), "is required: use 1-65535")
		}
	}
	return errs
}

// polCheckPortName checks a named port's name by Kubernetes' rules (as
// Calico does): at most 15 lower-case alphanumerics and '-', with a letter.
func polCheckPortName(p Path, name string, errs *ErrorList) {
	for _, msg := range k8svalidation.IsValidPortName(name) {
		errs.Addf(p, "%q is not a valid port name: %s", name, msg)
	}
}

// polCheckEndpointProtocol checks an endpoint port's protocol: known, and
// one that has ports.
func polCheckEndpointProtocol(p Path, proto numorstring.Protocol, errs *ErrorList) {
	if err := proto.Validate(); err != nil {
		errs.Add(p, err.Error())
		return
	}
	if !proto.SupportsPorts() {
		errs.Addf(p, "%s has no ports: use TCP, UDP, SCTP or UDPLite", proto)
	}
}
