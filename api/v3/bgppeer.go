package v3

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tabbynet/tabby/api/numorstring"
)

// KindBGPPeer is the kind of a BGP peering between Calico nodes and a remote
// BGP speaker (another node, a route reflector, a top-of-rack router or a
// local workload).
const KindBGPPeer = "BGPPeer"

// BGPPeer describes BGP peerings: which nodes peer (node or nodeSelector,
// all nodes when neither is set) and with whom (peerIP, peerSelector or
// localWorkloadSelector).
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=bgppeers
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec BGPPeerSpec `json:"spec,omitempty"`
}

// BGPPeerSpec is the content of a BGPPeer.
type BGPPeerSpec struct {
	// Node is the name of the one node that has this peering. When neither
	// node nor nodeSelector is set, every node has it.
	Node string `json:"node,omitempty"`
	// NodeSelector selects the nodes that have this peering; node must then
	// be empty.
	NodeSelector string `json:"nodeSelector,omitempty"`
	// PeerIP is the peer's address, optionally with a port: <IPv4>,
	// <IPv4>:<port>, <IPv6> or [<IPv6>]:<port>. Without a port, a Calico
	// node peer's BGPConfiguration listenPort is used, else 179.
	PeerIP string `json:"peerIP,omitempty"`
	// ASNumber is the peer's AS number.
	ASNumber numorstring.ASNumber `json:"asNumber,omitempty"`
	// LocalASNumber is the AS number the nodes present to this peer instead
	// of the one from the default BGPConfiguration.
	LocalASNumber *numorstring.ASNumber `json:"localASNumber,omitempty"`
	// PeerSelector selects Calico nodes to peer with; peerIP and asNumber
	// must then be empty (the remote node's own address and AS are used).
	PeerSelector string `json:"peerSelector,omitempty"`
	// LocalWorkloadSelector selects local workloads to peer with (at the
	// address of BGPConfiguration localWorkloadPeeringIPV4/6); peerIP and
	// peerSelector must then be empty and asNumber set.
	LocalWorkloadSelector string `json:"localWorkloadSelector,omitempty"`
	// KeepOriginalNextHop keeps the next hop of routes sent to the peer
	// ("next hop keep") instead of setting it to self. Deprecated: use
	// nextHopMode; the two cannot both be set.
	KeepOriginalNextHop bool `json:"keepOriginalNextHop,omitempty"`
	// NextHopMode sets the next hop of routes sent to the peer: Auto (BGP's
	// usual behaviour), Self ("next hop self") or Keep ("next hop keep").
	NextHopMode *NextHopMode `json:"nextHopMode,omitempty"`
	// Password is the BGP (TCP MD5) password of the peerings.
	Password *BGPPassword `json:"password,omitempty"`
	// SourceAddress is UseNodeIP (use the node's IP as the session's source
	// address) or None (let the kernel choose). [Default: UseNodeIP]
	SourceAddress SourceAddress `json:"sourceAddress,omitempty"`
	// MaxRestartTime is the graceful-restart time of the peerings (BIRD's
	// default of 120s when unset).
	MaxRestartTime *metav1.Duration `json:"maxRestartTime,omitempty"`
	// NumAllowedLocalASNumbers is how many times the local AS number may
	// appear in a received route's AS path. It disables BGP loop
	// prevention; use only when needed.
	NumAllowedLocalASNumbers *int32 `json:"numAllowedLocalASNumbers,omitempty"`
	// TTLSecurity enables the generalized TTL security mechanism (GTSM): the
	// number of hops between the peers, packets arriving with a lower TTL
	// than that implies are dropped.
	TTLSecurity *uint8 `json:"ttlSecurity,omitempty"`
	// KeepaliveTime is the BGP keepalive interval of the peerings (BIRD's
	// default of a third of the hold time when unset).
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`
	// ReachableBy is a gateway address through which the peer is reached;
	// a static /32 or /128 route to peerIP via it stops route flapping.
	// Needs peerIP, of the same IP version.
	ReachableBy string `json:"reachableBy,omitempty"`
	// Filters names the BGPFilters applied to the peerings, in order.
	// +listType=atomic
	Filters []string `json:"filters,omitempty"`
	// ReversePeering, for peerings between Calico nodes, says whether the
	// reverse peering from the nodes selected by peerSelector is generated
	// automatically (Auto) or needs its own BGPPeer (Manual). [Default: Auto]
	ReversePeering *ReversePeering `json:"reversePeering,omitempty"`
}

// SourceAddress says how the source address of a peering is chosen.
// +kubebuilder:validation:Enum=UseNodeIP;None
type SourceAddress string

// Source address modes.
const (
	SourceAddressUseNodeIP SourceAddress = "UseNodeIP"
	SourceAddressNone      SourceAddress = "None"
)

// NextHopMode says how the next hop of routes sent to a peer is set.
// +kubebuilder:validation:Enum=Auto;Self;Keep
type NextHopMode string

// Next hop modes.
const (
	NextHopModeAuto NextHopMode = "Auto"
	NextHopModeSelf NextHopMode = "Self"
	NextHopModeKeep NextHopMode = "Keep"
)

// ReversePeering says whether reverse peerings are generated.
// +kubebuilder:validation:Enum=Auto;Manual
type ReversePeering string

// Reverse peering modes.
const (
	ReversePeeringAuto   ReversePeering = "Auto"
	ReversePeeringManual ReversePeering = "Manual"
)

// BGPPassword says where a BGP password comes from.
type BGPPassword struct {
	// SecretKeyRef selects a key of a Secret in the namespace of the node
	// agent's pod.
	SecretKeyRef *corev1.SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// BGPPeerList is a list of BGPPeer.
// +kubebuilder:object:root=true
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindBGPPeer, Plural: "bgppeers",
		New:     func() Resource { return &BGPPeer{TypeMeta: typeMeta(KindBGPPeer)} },
		NewList: func() runtimeObject { return &BGPPeerList{TypeMeta: typeMeta(KindBGPPeer + "List")} },
	})
}

// Default implements Resource. Calico stores BGPPeers as written: the
// documented defaults (sourceAddress UseNodeIP, reversePeering Auto) are
// what the unset fields mean to the BGP daemon's configuration, so they are
// not filled in here.
func (b *BGPPeer) Default() {}

// Validate implements Resource; the rules are in bgppeer_validate.go.
func (b *BGPPeer) Validate() ErrorList {
	errs := validateMeta(&b.ObjectMeta, false)
	errs.Extend(b.Spec.validate(Path("spec")))
	return errs
}
