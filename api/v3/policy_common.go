package v3

import "github.com/tabbynet/tabby/api/numorstring"

// PolicyType says which direction of traffic a policy applies to.
// +kubebuilder:validation:Enum=Ingress;Egress
type PolicyType string

// The values of PolicyType.
const (
	PolicyTypeIngress PolicyType = "Ingress"
	PolicyTypeEgress  PolicyType = "Egress"
)

// Action is what a rule (or a tier's default) does with a matching packet.
// +kubebuilder:validation:Enum=Allow;Deny;Log;Pass
type Action string

// The values of Action. Pass skips the rest of the tier and goes on to the
// next tier (or to the endpoint's profiles after the last tier).
const (
	Allow Action = "Allow"
	Deny  Action = "Deny"
	Log   Action = "Log"
	Pass  Action = "Pass"
)

// PolicyPerformanceHint is a hint to the policy engine that never changes
// what a policy enforces.
// +kubebuilder:validation:Enum=AssumeNeededOnEveryNode
type PolicyPerformanceHint string

// PerfHintAssumeNeededOnEveryNode asks Felix to program the policy on every
// node even where no local endpoint matches it (preloading large policies).
const PerfHintAssumeNeededOnEveryNode PolicyPerformanceHint = "AssumeNeededOnEveryNode"

// Rule is a set of match criteria and an action. All criteria must match for
// the rule to match; each positive criterion has a negated "not" twin, and a
// rule may use both.
type Rule struct {
	// Action is what to do with a matching packet: Allow, Deny, Log or Pass.
	Action Action `json:"action"`

	// IPVersion restricts the rule to IPv4 (4) or IPv6 (6) traffic.
	// +kubebuilder:validation:Enum=4;6
	// +optional
	IPVersion *int `json:"ipVersion,omitempty"`

	// Protocol restricts the rule to one IP protocol: TCP, UDP, ICMP, ICMPv6,
	// SCTP, UDPLite or a number 1-255. Required when the rule matches ports.
	Protocol *numorstring.Protocol `json:"protocol,omitempty"`

	// ICMP restricts the rule to an ICMP type (and code); it needs protocol
	// ICMP or ICMPv6.
	ICMP *ICMPFields `json:"icmp,omitempty"`

	// NotProtocol is the negated version of Protocol.
	NotProtocol *numorstring.Protocol `json:"notProtocol,omitempty"`

	// NotICMP is the negated version of ICMP.
	NotICMP *ICMPFields `json:"notICMP,omitempty"`

	// Source holds the match criteria on the packet's source.
	// +optional
	Source EntityRule `json:"source,omitzero"`

	// Destination holds the match criteria on the packet's destination.
	// +optional
	Destination EntityRule `json:"destination,omitzero"`

	// HTTP matches HTTP requests (methods and paths). It is parsed and
	// validated but Tabby does not enforce it (Calico needs its
	// application-layer policy add-on for that).
	HTTP *HTTPMatch `json:"http,omitempty"`

	// Metadata holds extra information about the rule.
	Metadata *RuleMetadata `json:"metadata,omitempty"`
}

// HTTPPath matches an HTTP path, either exactly or by prefix (set exactly one).
type HTTPPath struct {
	// Exact matches the whole path.
	// +kubebuilder:validation:MaxLength=1024
	Exact string `json:"exact,omitempty"`
	// Prefix matches paths that start with this value.
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix,omitempty"`
}

// HTTPMatch matches HTTP requests; methods and paths are ANDed, the entries
// within each are ORed.
type HTTPMatch struct {
	// Methods lists HTTP methods (GET, PUT, ...) to match.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Methods []string `json:"methods,omitempty"`
	// Paths lists HTTP paths to match; each entry sets exact or prefix.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Paths []HTTPPath `json:"paths,omitempty"`
}

// ICMPFields matches an ICMP type and, optionally, a code within it.
type ICMPFields struct {
	// Type is the ICMP type, e.g. 8 for echo request (ping).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=254
	// +optional
	Type *int `json:"type,omitempty"`
	// Code is the ICMP code; it needs Type (a limit of the kernel's
	// iptables ICMP match).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=255
	// +optional
	Code *int `json:"code,omitempty"`
}

// EntityRule holds the match criteria for one end of a packet: the source
// endpoint (and originating traffic) or the destination endpoint (and
// terminating traffic).
type EntityRule struct {
	// Nets matches addresses in any of these CIDRs.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	Nets []string `json:"nets,omitempty"`

	// Selector matches Calico endpoints (and network sets) whose labels
	// match. Unlike NotSelector, "!has(x)" here still matches only
	// Calico-controlled endpoints.
	// +kubebuilder:validation:MaxLength=1024
	Selector string `json:"selector,omitempty"`

	// NamespaceSelector limits the match to endpoints in namespaces whose
	// labels match. Empty means the policy's own namespace for a
	// NetworkPolicy and all namespaces for a GlobalNetworkPolicy; "global()"
	// limits a NetworkPolicy's Selector to non-namespaced resources.
	// +kubebuilder:validation:MaxLength=1024
	NamespaceSelector string `json:"namespaceSelector,omitempty"`

	// Services matches the endpoints (and their ports) of a Kubernetes
	// Service. It excludes Selector, NotSelector, NamespaceSelector, Nets,
	// NotNets and ServiceAccounts, and is allowed only in an ingress rule's
	// source or an egress rule's destination.
	Services *ServiceMatch `json:"services,omitempty"`

	// Ports matches these ports: numbers, "min:max" ranges or named ports.
	// Requires a protocol with ports (TCP, UDP, SCTP or UDPLite).
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	Ports []numorstring.Port `json:"ports,omitempty"`

	// NotNets is the negated version of Nets.
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	NotNets []string `json:"notNets,omitempty"`

	// NotSelector is the negated version of Selector; it also matches
	// traffic from non-Calico sources.
	// +kubebuilder:validation:MaxLength=1024
	NotSelector string `json:"notSelector,omitempty"`

	// NotPorts is the negated version of Ports.
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	NotPorts []numorstring.Port `json:"notPorts,omitempty"`

	// ServiceAccounts matches pods running as a matching service account.
	ServiceAccounts *ServiceAccountMatch `json:"serviceAccounts,omitempty"`
}

// ServiceMatch names a Kubernetes Service.
type ServiceMatch struct {
	// Name is the Service's name.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Namespace is the Service's namespace; empty means the policy's own
	// namespace (a GlobalNetworkPolicy must set it).
	// +kubebuilder:validation:MaxLength=253
	Namespace string `json:"namespace,omitempty"`
}

// ServiceAccountMatch matches pods by their service account; Names and
// Selector are ANDed when both are set.
type ServiceAccountMatch struct {
	// Names matches service accounts with any of these names.
	// +listType=set
	Names []string `json:"names,omitempty"`
	// Selector matches service accounts whose labels match.
	Selector string `json:"selector,omitempty"`
}

// RuleMetadata is extra information attached to a rule.
type RuleMetadata struct {
	// Annotations are key/value pairs describing the rule.
	Annotations map[string]string `json:"annotations,omitempty"`
}
