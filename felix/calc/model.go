package calc

import (
	"fmt"
	"net/netip"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Input is everything the calculation reads: the cluster's policy-relevant
// resources and the name of the node felix runs on. Slices may be in any
// order; Compute does not modify them.
type Input struct {
	Node                  string
	WorkloadEndpoints     []*v3.WorkloadEndpoint
	HostEndpoints         []*v3.HostEndpoint
	NetworkPolicies       []*v3.NetworkPolicy
	GlobalNetworkPolicies []*v3.GlobalNetworkPolicy
	Tiers                 []*v3.Tier
	Profiles              []*v3.Profile
	NetworkSets           []*v3.NetworkSet
	GlobalNetworkSets     []*v3.GlobalNetworkSet
	// EndpointSlices are the Kubernetes EndpointSlices of the cluster's
	// Services, read only when FollowsServices is set.
	EndpointSlices []*v3.KubernetesEndpointSlice
	// FollowsServices says that felix follows Kubernetes Services (it does
	// on the Kubernetes datastore, as Calico's felix): a rule's services
	// match selects the service's endpoints. Without it such a rule cannot
	// be rendered (fail-closed; see convertRules).
	FollowsServices bool
	// Staged are staged policies to evaluate as if enforced (Calico's
	// pending verdicts). felix never enforces them: only the pending
	// evaluations (the flow log collector, `calicoctl policy trace`) add
	// them; felix's Engine refuses them.
	Staged []*StagedPolicy
}

// Add files one resource under its kind. It reports false for kinds the
// calculation does not take (the caller decides what to do with those).
func (in *Input) Add(o any) bool {
	switch o := o.(type) {
	case *v3.WorkloadEndpoint:
		in.WorkloadEndpoints = append(in.WorkloadEndpoints, o)
	case *v3.HostEndpoint:
		in.HostEndpoints = append(in.HostEndpoints, o)
	case *v3.NetworkPolicy:
		in.NetworkPolicies = append(in.NetworkPolicies, o)
	case *v3.GlobalNetworkPolicy:
		in.GlobalNetworkPolicies = append(in.GlobalNetworkPolicies, o)
	case *v3.Tier:
		in.Tiers = append(in.Tiers, o)
	case *v3.Profile:
		in.Profiles = append(in.Profiles, o)
	case *v3.NetworkSet:
		in.NetworkSets = append(in.NetworkSets, o)
	case *v3.GlobalNetworkSet:
		in.GlobalNetworkSets = append(in.GlobalNetworkSets, o)
	case *v3.KubernetesEndpointSlice:
		in.EndpointSlices = append(in.EndpointSlices, o)
	case *StagedPolicy:
		in.Staged = append(in.Staged, o)
	default:
		return false
	}
	return true
}

// Result is the desired policy dataplane of one node.
type Result struct {
	// Endpoints are the local endpoints, sorted by Key.
	Endpoints []Endpoint
	// Policies are the active policies: those that apply to at least one
	// local endpoint.
	Policies map[PolicyID]*Policy
	// Profiles are the profiles named by local endpoints.
	Profiles map[string]*Profile
	// IPSets are the sets referenced by the rules of active policies and
	// profiles, by ID.
	IPSets map[string]*IPSet
	// Problems lists the bad input that was skipped, sorted.
	Problems []Problem
	// Unrenderable lists the rules (and policies) felix cannot enforce as
	// written, each enforced in a fail-closed form instead, sorted.
	Unrenderable []Unrenderable
}

// EndpointKind says whether an endpoint is a workload or a host interface.
type EndpointKind string

const (
	Workload EndpointKind = "wep"
	Host     EndpointKind = "hep"
)

// Endpoint is one local endpoint and the policy that applies to it.
type Endpoint struct {
	Kind EndpointKind
	// Key is "<namespace>/<name>" for a workload, the name for a host endpoint.
	Key       string
	Interface string
	Addrs     []netip.Prefix
	// Ingress and Egress list, in evaluation order, the tiers that have at
	// least one policy for this endpoint in that direction. When a
	// direction has no tiers, the profiles decide.
	Ingress, Egress []TierPolicies
	// Host endpoints only (as Calico splits a host endpoint's policies):
	// Ingress and Egress above hold its normal policies (tracked, after
	// DNAT, applyOnForward or not); ForwardIngress and ForwardEgress the
	// normal policies with applyOnForward, which also police traffic
	// forwarded through the interface; PreDNATIngress the preDNAT
	// policies (mangle table); UntrackedIngress and UntrackedEgress the
	// doNotTrack policies (raw table). A workload endpoint ignores
	// preDNAT and doNotTrack policies.
	ForwardIngress, ForwardEgress     []TierPolicies
	PreDNATIngress                    []TierPolicies
	UntrackedIngress, UntrackedEgress []TierPolicies
	// Profiles are the endpoint's profiles that exist, in its order.
	Profiles []string
}

// TierPolicies is the ordered list of one tier's policies applying to an
// endpoint in one direction.
type TierPolicies struct {
	Tier string
	// DefaultAction is what happens to a packet no policy of the tier
	// decided: Deny, or Pass to the next tier (then the profiles).
	DefaultAction v3.Action
	Policies      []PolicyID
}

// PolicyID names a policy. Namespace is empty for a GlobalNetworkPolicy.
type PolicyID struct {
	Tier, Namespace, Name string
}

func (id PolicyID) String() string {
	if id.Namespace == "" {
		return id.Tier + "/" + id.Name
	}
	return id.Tier + "/" + id.Namespace + "/" + id.Name
}

// Policy is an active policy with its rules resolved.
type Policy struct {
	ID              PolicyID
	Ingress, Egress []Rule
}

// Profile is a profile with its rules resolved.
type Profile struct {
	Name            string
	Ingress, Egress []Rule
}

// Rule is one policy rule with every label and named-port match turned into
// an ipset reference. All non-empty fields must match (AND); the entries of
// a positive list are alternatives (OR), those of a negative list all must
// not match.
type Rule struct {
	Action v3.Action
	// Index is the rule's position in its policy's or profile's own list
	// of that direction (a rule felix cannot render may be left out of
	// the converted list, so it can differ from the position there).
	Index int
	// IPVersion is 4 or 6 to restrict the rule to that family, 0 for both.
	IPVersion int
	// Protocol and NotProtocol are IP protocol numbers, 0 when unset.
	Protocol, NotProtocol uint8
	ICMP, NotICMP         *ICMPMatch
	Src, Dst              EntityMatch
}

// ICMPMatch matches an ICMP (or ICMPv6) type and optionally code.
type ICMPMatch struct {
	Type int
	Code *int
}

// EntityMatch is one side (source or destination) of a rule.
type EntityMatch struct {
	// Nets and NotNets are CIDRs, sorted. NetSet names a hash:net ipset
	// holding Nets when there is more than one; NotNetSet one holding
	// NotNets whenever there are any.
	Nets, NotNets     []netip.Prefix
	NetSet, NotNetSet string
	SelSet, NotSelSet string // selector ipsets (hash:net)
	Ports, NotPorts   []PortRange
	NamedPortSets     []string // hash:ip,port sets: one must match
	NotNamedPortSets  []string // hash:ip,port sets: none may match
	// SvcSet is the set of a Kubernetes Service's endpoints (a services
	// match): hash:ip,port (address,protocol:port) on the destination
	// side, hash:net (addresses) on the source side.
	SvcSet            string
	HasPortConstraint bool // Ports or NamedPortSets were given (even if a named port resolved to nothing)
}

// PortRange is an inclusive range of ports; Min == Max for one port.
type PortRange struct{ Min, Max uint16 }

func (p PortRange) String() string {
	if p.Min == p.Max {
		return fmt.Sprint(p.Min)
	}
	return fmt.Sprintf("%d:%d", p.Min, p.Max)
}

// IPSetType is the kernel ipset type of a set.
type IPSetType string

const (
	HashNet    IPSetType = "hash:net"
	HashIPPort IPSetType = "hash:ip,port"
)

// IPSet is one ipset, both families together; renderers split the members
// by family. IDs are short and stable: "s:<hash>" for a selector, "n:<hash>"
// for a named port, "c:<hash>" for a list of CIDRs, Calico's "svc:<hash>"
// and "svcnoport:<hash>" for a Service's endpoints with and without their
// ports.
type IPSet struct {
	ID   string
	Type IPSetType
	// Members are sorted: "10.0.0.1/32" style prefixes for hash:net,
	// "10.0.0.1,tcp:80" style for hash:ip,port.
	Members MemberList
}

// Problem is one piece of bad input that was skipped.
type Problem struct {
	Kind, Namespace, Name string
	Reason                string
}

func (p Problem) String() string {
	name := p.Name
	if p.Namespace != "" {
		name = p.Namespace + "/" + p.Name
	}
	return fmt.Sprintf("%s %s: %s", p.Kind, name, p.Reason)
}

// Handling is how felix enforces a rule it cannot render as written. It
// never fails open: the traffic allowed is at most what the rule as
// written allows.
type Handling string

const (
	// Dropped: an Allow rule is left out (it allows nothing).
	Dropped Handling = "dropped"
	// Widened: a Deny rule keeps only the matches felix can render (it
	// denies at least what it should).
	Widened Handling = "widened"
	// Denied: the effect cannot be bounded (a Pass or Log rule, an
	// unknown action, a policy whose selector cannot be parsed or that
	// fails validation): every packet reaching the rule, or every packet
	// of the endpoints the policy may select in its directions, is
	// denied.
	Denied Handling = "denied"
)

// Reasons an Unrenderable gives: the part of the rule felix cannot render.
const (
	ReasonServices       = "services-match"
	ReasonHTTP           = "http-match"
	ReasonAction         = "action"
	ReasonIPVersion      = "ip-version"
	ReasonProtocol       = "protocol"
	ReasonICMP           = "icmp-match"
	ReasonNets           = "nets"
	ReasonSelector       = "selector"
	ReasonPorts          = "ports"
	ReasonPolicySelector = "policy-selector"
	ReasonInvalidPolicy  = "invalid-policy"
)

// Unrenderable is one rule, or one whole policy, that cannot be rendered
// as written, and how it is enforced instead.
type Unrenderable struct {
	// Kind, Namespace and Name are the policy's or profile's.
	Kind, Namespace, Name string
	// Direction is "ingress" or "egress"; Rule the rule's index in it
	// (-1: the whole policy, then Direction is "").
	Direction string
	Rule      int
	Action    v3.Action
	Handling  Handling
	// Reason is one of the Reason constants (for metrics), Detail the
	// error in words.
	Reason, Detail string
}

func (u Unrenderable) String() string {
	name := u.Name
	if u.Namespace != "" {
		name = u.Namespace + "/" + u.Name
	}
	where := "policy"
	if u.Rule >= 0 {
		where = fmt.Sprintf("%s rule %d (%s)", u.Direction, u.Rule, u.Action)
	}
	return fmt.Sprintf("%s %s: %s %s (%s): %s", u.Kind, name, where, u.Handling, u.Reason, u.Detail)
}

// objects lists every object of the input.
func (in *Input) objects() []any {
	out := make([]any, 0, len(in.WorkloadEndpoints)+len(in.HostEndpoints)+len(in.NetworkPolicies)+
		len(in.GlobalNetworkPolicies)+len(in.Tiers)+len(in.Profiles)+len(in.NetworkSets)+len(in.GlobalNetworkSets)+len(in.EndpointSlices))
	out = appendAll(out, in.WorkloadEndpoints)
	out = appendAll(out, in.HostEndpoints)
	out = appendAll(out, in.NetworkPolicies)
	out = appendAll(out, in.GlobalNetworkPolicies)
	out = appendAll(out, in.Tiers)
	out = appendAll(out, in.Profiles)
	out = appendAll(out, in.NetworkSets)
	out = appendAll(out, in.GlobalNetworkSets)
	out = appendAll(out, in.EndpointSlices)
	return appendAll(out, in.Staged)
}

func appendAll[T any](out []any, objs []T) []any {
	for _, o := range objs {
		out = append(out, o)
	}
	return out
}
