package v3

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// KindCalicoNodeStatus is the kind of a request for, and report of, one
// node's agent, BGP and route status.
const KindCalicoNodeStatus = "CalicoNodeStatus"

// CalicoNodeStatus asks the node agent on spec.node to report the classes
// of status named in spec.classes every spec.updatePeriodSeconds; the
// agent writes the report into status. Stored and served exactly as
// Calico stores it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,path=caliconodestatuses
type CalicoNodeStatus struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec CalicoNodeStatusSpec `json:"spec,omitempty"`
	// Status is the latest report (written by the node, not validated).
	// +optional
	Status CalicoNodeStatusStatus `json:"status"`
}

// CalicoNodeStatusSpec says which node reports what, how often.
type CalicoNodeStatusSpec struct {
	// Node is the name of the node that reports.
	Node string `json:"node,omitempty"`
	// Classes are the kinds of status to report: Agent, BGP, Routes.
	Classes []NodeStatusClassType `json:"classes,omitempty"`
	// UpdatePeriodSeconds is how often the status is refreshed (0 stops
	// refreshing; at most 86400, one day).
	UpdatePeriodSeconds *uint32 `json:"updatePeriodSeconds,omitempty"`
}

// CalicoNodeStatusStatus is the reported state. Its fields have no
// omitempty, as in Calico, so a stored object always carries them.
type CalicoNodeStatusStatus struct {
	// LastUpdated is when the status was last written (RFC 3339, UTC).
	// +nullable
	// +optional
	LastUpdated metav1.Time `json:"lastUpdated"`
	// Agent is the status of the BGP daemons.
	// +optional
	Agent CalicoNodeAgentStatus `json:"agent"`
	// BGP is the status of the node's BGP sessions.
	// +optional
	BGP CalicoNodeBGPStatus `json:"bgp"`
	// Routes are the routes the BGP daemon knows.
	// +optional
	Routes CalicoNodeBGPRouteStatus `json:"routes"`
}

// CalicoNodeAgentStatus is the status of the IPv4 and IPv6 BGP daemons.
type CalicoNodeAgentStatus struct {
	// BIRDV4 is the status of the IPv4 BIRD.
	// +optional
	BIRDV4 BGPDaemonStatus `json:"birdV4"`
	// BIRDV6 is the status of the IPv6 BIRD.
	// +optional
	BIRDV6 BGPDaemonStatus `json:"birdV6"`
}

// CalicoNodeBGPStatus counts and lists the node's BGP sessions.
type CalicoNodeBGPStatus struct {
	// NumberEstablishedV4 is the number of established IPv4 sessions.
	NumberEstablishedV4 int `json:"numberEstablishedV4"`
	// NumberNotEstablishedV4 is the number of other IPv4 sessions.
	NumberNotEstablishedV4 int `json:"numberNotEstablishedV4"`
	// NumberEstablishedV6 is the number of established IPv6 sessions.
	NumberEstablishedV6 int `json:"numberEstablishedV6"`
	// NumberNotEstablishedV6 is the number of other IPv6 sessions.
	NumberNotEstablishedV6 int `json:"numberNotEstablishedV6"`
	// PeersV4 are the IPv4 peers.
	PeersV4 []CalicoNodePeer `json:"peersV4,omitempty"`
	// PeersV6 are the IPv6 peers.
	PeersV6 []CalicoNodePeer `json:"peersV6,omitempty"`
}

// CalicoNodeBGPRouteStatus lists routes by family.
type CalicoNodeBGPRouteStatus struct {
	// RoutesV4 are the IPv4 routes.
	RoutesV4 []CalicoNodeRoute `json:"routesV4,omitempty"`
	// RoutesV6 are the IPv6 routes.
	RoutesV6 []CalicoNodeRoute `json:"routesV6,omitempty"`
}

// BGPDaemonStatus is the state of one BGP daemon.
type BGPDaemonStatus struct {
	// State is Ready or NotReady.
	State BGPDaemonState `json:"state,omitempty"`
	// Version is the daemon's version.
	Version string `json:"version,omitempty"`
	// RouterID is the daemon's router ID.
	RouterID string `json:"routerID,omitempty"`
	// LastBootTime is the daemon's last boot time, as it reports it.
	LastBootTime string `json:"lastBootTime,omitempty"`
	// LastReconfigurationTime is the daemon's last reconfiguration time.
	LastReconfigurationTime string `json:"lastReconfigurationTime,omitempty"`
}

// CalicoNodePeer is the state of one BGP session.
type CalicoNodePeer struct {
	// PeerIP is the peer's address.
	PeerIP string `json:"peerIP,omitempty"`
	// Type is NodeMesh, NodePeer or GlobalPeer.
	Type BGPPeerType `json:"type,omitempty"`
	// State is the BGP session state.
	State BGPSessionState `json:"state,omitempty"`
	// Since is when the state last changed, as the daemon reports it.
	Since string `json:"since,omitempty"`
}

// CalicoNodeRoute is one route the BGP daemon knows.
type CalicoNodeRoute struct {
	// Type is FIB (used for forwarding) or RIB.
	Type CalicoNodeRouteType `json:"type,omitempty"`
	// Destination is the route's prefix.
	Destination string `json:"destination,omitempty"`
	// Gateway is the next hop.
	Gateway string `json:"gateway,omitempty"`
	// Interface is the outgoing interface.
	Interface string `json:"interface,omitempty"`
	// LearnedFrom says where the route came from.
	LearnedFrom CalicoNodeRouteLearnedFrom `json:"learnedFrom,omitempty"`
}

// CalicoNodeRouteLearnedFrom is the source of a route.
type CalicoNodeRouteLearnedFrom struct {
	// SourceType is Kernel, Static, Direct, NodeMesh or BGPPeer.
	SourceType CalicoNodeRouteSourceType `json:"sourceType,omitempty"`
	// PeerIP is the peer that sent the route (NodeMesh, BGPPeer).
	PeerIP string `json:"peerIP,omitempty"`
}

// CalicoNodeRouteType is FIB or RIB.
// +kubebuilder:validation:Enum=FIB;RIB
type CalicoNodeRouteType string

// CalicoNodeRouteSourceType is where a route was learned.
// +kubebuilder:validation:Enum=Kernel;Static;Direct;NodeMesh;BGPPeer
type CalicoNodeRouteSourceType string

// NodeStatusClassType is a class of node status.
// +kubebuilder:validation:Enum=Agent;BGP;Routes
type NodeStatusClassType string

// The values calico-node reports, as Calico's.
const (
	RouteTypeFIB CalicoNodeRouteType = "FIB"
	RouteTypeRIB CalicoNodeRouteType = "RIB"

	RouteSourceTypeKernel   CalicoNodeRouteSourceType = "Kernel"
	RouteSourceTypeStatic   CalicoNodeRouteSourceType = "Static"
	RouteSourceTypeDirect   CalicoNodeRouteSourceType = "Direct"
	RouteSourceTypeNodeMesh CalicoNodeRouteSourceType = "NodeMesh"
	RouteSourceTypeBGPPeer  CalicoNodeRouteSourceType = "BGPPeer"

	BGPPeerTypeNodeMesh   BGPPeerType = "NodeMesh"
	BGPPeerTypeNodePeer   BGPPeerType = "NodePeer"
	BGPPeerTypeGlobalPeer BGPPeerType = "GlobalPeer"

	BGPDaemonStateReady    BGPDaemonState = "Ready"
	BGPDaemonStateNotReady BGPDaemonState = "NotReady"

	BGPSessionStateIdle        BGPSessionState = "Idle"
	BGPSessionStateConnect     BGPSessionState = "Connect"
	BGPSessionStateActive      BGPSessionState = "Active"
	BGPSessionStateOpenSent    BGPSessionState = "OpenSent"
	BGPSessionStateOpenConfirm BGPSessionState = "OpenConfirm"
	BGPSessionStateEstablished BGPSessionState = "Established"
	BGPSessionStateClose       BGPSessionState = "Close"
)

// Values of NodeStatusClassType.
const (
	NodeStatusClassTypeAgent  NodeStatusClassType = "Agent"
	NodeStatusClassTypeBGP    NodeStatusClassType = "BGP"
	NodeStatusClassTypeRoutes NodeStatusClassType = "Routes"
)

// BGPPeerType is how a BGP peering is configured.
// +kubebuilder:validation:Enum=NodeMesh;NodePeer;GlobalPeer
type BGPPeerType string

// BGPDaemonState is Ready or NotReady.
// +kubebuilder:validation:Enum=Ready;NotReady
type BGPDaemonState string

// BGPSessionState is a BGP finite-state-machine state.
// +kubebuilder:validation:Enum=Idle;Connect;Active;OpenSent;OpenConfirm;Established;Close
type BGPSessionState string

// CalicoNodeStatusList is a list of CalicoNodeStatus.
// +kubebuilder:object:root=true
type CalicoNodeStatusList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []CalicoNodeStatus `json:"items"`
}

func init() {
	register(KindInfo{
		Kind: KindCalicoNodeStatus, Plural: "caliconodestatuses",
		New: func() Resource { return &CalicoNodeStatus{TypeMeta: typeMeta(KindCalicoNodeStatus)} },
		NewList: func() runtimeObject {
			return &CalicoNodeStatusList{TypeMeta: typeMeta(KindCalicoNodeStatus + "List")}
		},
	})
}

// Default implements Resource; CalicoNodeStatus has no defaults.
func (s *CalicoNodeStatus) Default() {}

// maxNodeStatusPeriod is the longest update period Calico allows: a day.
const maxNodeStatusPeriod = 86400

// Validate implements Resource with the rules of Calico's validator: node
// required and a valid name, classes required and unique (each Agent, BGP
// or Routes), updatePeriodSeconds required and at most 86400. The status
// is the node's report and is not validated (as in Calico).
func (s *CalicoNodeStatus) Validate() ErrorList {
	errs := validateMeta(&s.ObjectMeta, false)
	sp := Path("spec")
	if s.Spec.Node == "" {
		errs.Add(sp.Child("node"), "is required")
	} else {
		polCheckName(sp.Child("node"), s.Spec.Node, &errs)
	}
	if len(s.Spec.Classes) == 0 {
		errs.Add(sp.Child("classes"), "is required: list one or more of Agent, BGP, Routes")
	}
	seen := map[NodeStatusClassType]bool{}
	for i, c := range s.Spec.Classes {
		cp := sp.Child("classes").Index(i)
		if c == "" {
			errs.Add(cp, "is empty: use Agent, BGP or Routes")
			continue
		}
		if oneOf(cp, string(c), &errs, string(NodeStatusClassTypeAgent), string(NodeStatusClassTypeBGP),
			string(NodeStatusClassTypeRoutes)) && seen[c] {
			errs.Addf(cp, "%q is listed twice", c)
		}
		seen[c] = true
	}
	if s.Spec.UpdatePeriodSeconds == nil {
		errs.Add(sp.Child("updatePeriodSeconds"), "is required (0 stops updates)")
	} else if *s.Spec.UpdatePeriodSeconds > maxNodeStatusPeriod {
		errs.Addf(sp.Child("updatePeriodSeconds"), "%d is more than %d (one day)", *s.Spec.UpdatePeriodSeconds, maxNodeStatusPeriod)
	}
	return errs
}
