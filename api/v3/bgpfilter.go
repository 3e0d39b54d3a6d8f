package v3

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindBGPFilter is the kind of an ordered set of import and export rules
// that BGPPeers apply to routes.
const KindBGPFilter = "BGPFilter"

// BGPFilter holds ordered route filter rules per direction and IP version.
// The first rule that matches a route decides; BGPPeers refer to filters by
// name in spec.filters.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=bgpfilters
type BGPFilter struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPFilterSpec `json:"spec,omitempty"`
}

// BGPFilterSpec is the content of a BGPFilter.
type BGPFilterSpec struct {
	// ExportV4 are the rules for IPv4 routes exported to a peer, in order.
	ExportV4 []BGPFilterRuleV4 `json:"exportV4,omitempty"`
	// ImportV4 are the rules for IPv4 routes imported from a peer, in order.
	// source does not apply: imported routes all come from peers.
	ImportV4 []BGPFilterRuleV4 `json:"importV4,omitempty"`
	// ExportV6 are the rules for IPv6 routes exported to a peer, in order.
	ExportV6 []BGPFilterRuleV6 `json:"exportV6,omitempty"`
	// ImportV6 are the rules for IPv6 routes imported from a peer, in order.
	// source does not apply: imported routes all come from peers.
	ImportV6 []BGPFilterRuleV6 `json:"importV6,omitempty"`
}

// BGPFilterRuleV4 is one IPv4 filter rule: match criteria (all optional,
// all must match), an action, and operations applied to accepted routes.
type BGPFilterRuleV4 struct {
	// CIDR the route's prefix is compared with, by matchOperator and
	// prefixLength. IPv4, host bits zero. Set together with matchOperator.
	CIDR string `json:"cidr,omitempty"`
	// PrefixLength limits the prefix lengths matched within cidr (0-32).
	// Without it, cidr's own length up to 32 matches. Needs cidr.
	PrefixLength *BGPFilterPrefixLengthV4 `json:"prefixLength,omitempty"`
	// Source RemotePeers restricts an export rule to routes learned from BGP
	// peers (not originated locally). Not for import rules.
	Source BGPFilterMatchSource `json:"source,omitempty"`
	// Interface restricts the rule to routes whose outgoing interface
	// matches this name or glob (e.g. "eth*").
	Interface string `json:"interface,omitempty"`
	// MatchOperator compares the route with cidr: Equal, NotEqual, In (within
	// or equal) or NotIn. Set together with cidr.
	MatchOperator BGPFilterMatchOperator `json:"matchOperator,omitempty"`
	// PeerType restricts the rule to eBGP or iBGP peers.
	PeerType BGPFilterPeerType `json:"peerType,omitempty"`
	// Communities restricts the rule to routes carrying the community.
	Communities *BGPFilterCommunityMatch `json:"communities,omitempty"`
	// ASPathPrefix restricts the rule to routes whose AS path starts with
	// these AS numbers.
	ASPathPrefix []numorstring.ASNumber `json:"asPathPrefix,omitempty"`
	// Priority restricts the rule to routes with this priority (metric), in
	// the units of FelixConfiguration's route priorities (1-2147483646).
	Priority *int `json:"priority,omitempty"`
	// Action for matching routes: Accept or Reject.
	Action BGPFilterAction `json:"action"`
	// Operations modify accepted routes, in order (1-10; action Accept only).
	Operations []BGPFilterOperation `json:"operations,omitempty"`
}

// BGPFilterRuleV6 is one IPv6 filter rule; see BGPFilterRuleV4.
type BGPFilterRuleV6 struct {
	// CIDR the route's prefix is compared with, by matchOperator and
	// prefixLength. IPv6, host bits zero. Set together with matchOperator.
	CIDR string `json:"cidr,omitempty"`
	// PrefixLength limits the prefix lengths matched within cidr (0-128).
	// Without it, cidr's own length up to 128 matches. Needs cidr.
	PrefixLength *BGPFilterPrefixLengthV6 `json:"prefixLength,omitempty"`
	// Source RemotePeers restricts an export rule to routes learned from BGP
	// peers (not originated locally). Not for import rules.
	Source BGPFilterMatchSource `json:"source,omitempty"`
	// Interface restricts the rule to routes whose outgoing interface
	// matches this name or glob (e.g. "eth*").
	Interface string `json:"interface,omitempty"`
	// MatchOperator compares the route with cidr: Equal, NotEqual, In (within
	// or equal) or NotIn. Set together with cidr.
	MatchOperator BGPFilterMatchOperator `json:"matchOperator,omitempty"`
	// PeerType restricts the rule to eBGP or iBGP peers.
	PeerType BGPFilterPeerType `json:"peerType,omitempty"`
	// Communities restricts the rule to routes carrying the community.
	Communities *BGPFilterCommunityMatch `json:"communities,omitempty"`
	// ASPathPrefix restricts the rule to routes whose AS path starts with
	// these AS numbers.
	ASPathPrefix []numorstring.ASNumber `json:"asPathPrefix,omitempty"`
	// Priority restricts the rule to routes with this priority (metric), in
	// the units of FelixConfiguration's route priorities (1-2147483646).
	Priority *int `json:"priority,omitempty"`
	// Action for matching routes: Accept or Reject.
	Action BGPFilterAction `json:"action"`
	// Operations modify accepted routes, in order (1-10; action Accept only).
	Operations []BGPFilterOperation `json:"operations,omitempty"`
}

// BGPFilterPrefixLengthV4 bounds the IPv4 prefix lengths a rule matches.
type BGPFilterPrefixLengthV4 struct {
	// Min is the shortest prefix length matched (0-32).
	Min *int32 `json:"min,omitempty"`
	// Max is the longest prefix length matched (0-32).
	Max *int32 `json:"max,omitempty"`
}

// BGPFilterPrefixLengthV6 bounds the IPv6 prefix lengths a rule matches.
type BGPFilterPrefixLengthV6 struct {
	// Min is the shortest prefix length matched (0-128).
	Min *int32 `json:"min,omitempty"`
	// Max is the longest prefix length matched (0-128).
	Max *int32 `json:"max,omitempty"`
}

// BGPFilterMatchSource restricts a rule by where a route came from.
// +kubebuilder:validation:Enum=RemotePeers
type BGPFilterMatchSource string

// BGPFilterSourceRemotePeers matches routes learned from BGP peers.
const BGPFilterSourceRemotePeers BGPFilterMatchSource = "RemotePeers"

// BGPFilterMatchOperator compares a route's prefix with a rule's CIDR.
// +kubebuilder:validation:Enum=Equal;NotEqual;In;NotIn
type BGPFilterMatchOperator string

// Match operators.
const (
	MatchOperatorEqual    BGPFilterMatchOperator = "Equal"
	MatchOperatorNotEqual BGPFilterMatchOperator = "NotEqual"
	MatchOperatorIn       BGPFilterMatchOperator = "In"
	MatchOperatorNotIn    BGPFilterMatchOperator = "NotIn"
)

// BGPFilterAction is what a matching rule does with a route.
// +kubebuilder:validation:Enum=Accept;Reject
type BGPFilterAction string

// Filter actions. (Calico names these Accept and Reject.)
const (
	BGPFilterActionAccept BGPFilterAction = "Accept"
	BGPFilterActionReject BGPFilterAction = "Reject"
)

// BGPFilterPeerType restricts a rule to one type of peer.
// +kubebuilder:validation:Enum=eBGP;iBGP
type BGPFilterPeerType string

// Peer types.
const (
	BGPFilterPeerTypeEBGP BGPFilterPeerType = "eBGP"
	BGPFilterPeerTypeIBGP BGPFilterPeerType = "iBGP"
)

// BGPCommunityValue is a BGP community: aa:nn (standard, 16-bit numbers)
// or aa:nn:mm (large, 32-bit numbers).
type BGPCommunityValue string

// BGPFilterCommunityMatch matches routes by community.
type BGPFilterCommunityMatch struct {
	// Values the route must carry; exactly one value for now.
	Values []BGPCommunityValue `json:"values"`
}

// BGPFilterOperation is one modification of a route; exactly one field is
// set.
type BGPFilterOperation struct {
	// AddCommunity adds a BGP community to the route.
	AddCommunity *BGPFilterAddCommunity `json:"addCommunity,omitempty"`
	// PrependASPath prepends AS numbers to the route's AS path.
	PrependASPath *BGPFilterPrependASPath `json:"prependASPath,omitempty"`
	// SetPriority sets the route's priority (metric).
	SetPriority *BGPFilterSetPriority `json:"setPriority,omitempty"`
}

// BGPFilterAddCommunity adds a community to a route.
type BGPFilterAddCommunity struct {
	// Value is the community to add.
	Value BGPCommunityValue `json:"value"`
}

// BGPFilterPrependASPath prepends AS numbers to a route's AS path.
type BGPFilterPrependASPath struct {
	// Prefix is prepended in the order listed: [65000, 65001] gives the
	// path "65000 65001 <original>". 1-10 AS numbers.
	Prefix []numorstring.ASNumber `json:"prefix"`
}

// BGPFilterSetPriority sets a route's priority.
type BGPFilterSetPriority struct {
	// Value is the priority (metric), 1-2147483646, in the units of
	// FelixConfiguration's route priorities.
	Value int `json:"value"`
}

// BGPFilterList is a list of BGPFilter.
// +kubebuilder:object:root=true
type BGPFilterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPFilter `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindBGPFilter, Plural: "bgpfilters",
		New:     func() Resource { return &BGPFilter{TypeMeta: typeMeta(KindBGPFilter)} },
		NewList: func() runtimeObject { return &BGPFilterList{TypeMeta: typeMeta(KindBGPFilter + "List")} },
	})
}

// Default implements Resource; BGPFilter has no defaults.
func (f *BGPFilter) Default() {}

// Validate implements Resource; the rules are in bgpfilter_validate.go.
func (f *BGPFilter) Validate() ErrorList {
	errs := validateMeta(&f.ObjectMeta, false)
	p := Path("spec")
	for i := range f.Spec.ExportV4 {
		errs.Extend(f.Spec.ExportV4[i].rule().validate(p.Child("exportV4").Index(i), false))
	}
	for i := range f.Spec.ImportV4 {
		errs.Extend(f.Spec.ImportV4[i].rule().validate(p.Child("importV4").Index(i), true))
	}
	for i := range f.Spec.ExportV6 {
		errs.Extend(f.Spec.ExportV6[i].rule().validate(p.Child("exportV6").Index(i), false))
	}
	for i := range f.Spec.ImportV6 {
		errs.Extend(f.Spec.ImportV6[i].rule().validate(p.Child("importV6").Index(i), true))
	}
	return errs
}
