package collector

import (
	"encoding/binary"
	"net/netip"
	"time"
)

// Endpoint is what Lookups know of an IP: a workload (Kind "wep", its
// namespace and pod name), a host endpoint ("hep"), a (Global)NetworkSet
// ("ns", "gns") or nothing known ("net", Name "pub" or "pvt" as Calico's
// aggregated names for public and private addresses).
type Endpoint struct {
	Kind      string `json:"type"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
}

// PolicyHit is one verdict on a flow's path: a policy's or profile's rule
// (Kind gnp, np, knp or pro; RuleIndex its index as written), or a tier's
// end (Kind "eot", Name empty, RuleIndex -1) or the end of the profiles
// (Kind "pro", Name empty, RuleIndex -1). Index is the hit's position in
// the flow's path (0 first).
type PolicyHit struct {
	Index     int    `json:"index"`
	Kind      string `json:"kind"`
	Tier      string `json:"tier,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Action    string `json:"action"`
	RuleIndex int    `json:"rule_index"`
}

// FlowKey is what a flow is aggregated by: the endpoints (and their IPs),
// destination port, protocol, which side reported it (Src: the sender's
// egress policy, Dst: the receiver's ingress policy), the action and the
// path of policy hits. The source port is aggregated away.
type FlowKey struct {
	Source   Endpoint `json:"source"`
	Dest     Endpoint `json:"dest"`
	SourceIP string   `json:"source_ip"`
	DestIP   string   `json:"dest_ip"`
	DestPort uint16   `json:"dest_port"`
	Proto    string   `json:"proto"`
	Reporter string   `json:"reporter"`
	Action   string   `json:"action"`
	// Policies is the path as "kind/tier/namespace/name/rule/action"
	// joined by ";" (a comparable form of Enforced).
	Policies string `json:"-"`
}

// Flow is one flow log: a key's traffic over one flush interval.
type Flow struct {
	FlowKey
	StartTime time.Time `json:"start_time"`
	EndTime   time.Time `json:"end_time"`
	// Enforced are the verdicts that decided the flow, in path order
	// (logged by the kernel); Pending are those with the staged policies
	// as if enforced (evaluated, see pending.go; empty for host endpoint
	// reports and with FlowLogsPolicyEvaluationMode None).
	Enforced []PolicyHit `json:"enforced_policies"`
	Pending  []PolicyHit `json:"pending_policies"`
	// Packets and Bytes are both directions' (conntrack's for allowed
	// connections, NFLOG's for denied packets).
	Packets uint64 `json:"packets"`
	Bytes   uint64 `json:"bytes"`
	// Connections started in the interval, completed (gone from
	// conntrack) in it, and live at its end.
	ConnectionsStarted   int `json:"num_connections_started"`
	ConnectionsCompleted int `json:"num_connections_completed"`
	ConnectionsLive      int `json:"num_connections_live"`
	// Node is the node that reported the flow.
	Node string `json:"node"`
}

// Tuple is a packet's or connection's 5-tuple (as sent, before any reply
// direction).
type Tuple struct {
	Src, Dst         netip.Addr
	Proto            uint8
	SrcPort, DstPort uint16
}

// Packet is one NFLOG message: a verdict (its prefix) on a packet.
type Packet struct {
	Tuple  Tuple
	Prefix string
	// Bytes is the packet's IP length.
	Bytes int
}

// Conn is one conntrack entry's counters (both directions), keyed by its
// original tuple.
type Conn struct {
	Tuple          Tuple
	Packets, Bytes uint64
}

func protoName(p uint8) string {
	switch p {
	case 1:
		return "icmp"
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 58:
		return "icmp6"
	case 132:
		return "sctp"
	}
	return itoa(int(p))
}

// ParseIPHeader reads the tuple and the IP length of a packet's first
// bytes (IPv4 or IPv6; ports for TCP, UDP and SCTP).
func ParseIPHeader(b []byte) (Tuple, int, bool) {
	var t Tuple
	if len(b) < 1 {
		return t, 0, false
	}
	var l4 []byte
	var length int
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return t, 0, false
		}
		ihl := int(b[0]&0xf) * 4
		length = int(binary.BigEndian.Uint16(b[2:4]))
		t.Proto = b[9]
		t.Src = netip.AddrFrom4([4]byte(b[12:16]))
		t.Dst = netip.AddrFrom4([4]byte(b[16:20]))
		if len(b) >= ihl {
			l4 = b[ihl:]
		}
	case 6:
		if len(b) < 40 {
			return t, 0, false
		}
		length = int(binary.BigEndian.Uint16(b[4:6])) + 40
		t.Proto = b[6]
		t.Src = netip.AddrFrom16([16]byte(b[8:24]))
		t.Dst = netip.AddrFrom16([16]byte(b[24:40]))
		l4 = b[40:]
	default:
		return t, 0, false
	}
	if (t.Proto == 6 || t.Proto == 17 || t.Proto == 132) && len(l4) >= 4 {
		t.SrcPort = binary.BigEndian.Uint16(l4[0:2])
		t.DstPort = binary.BigEndian.Uint16(l4[2:4])
	}
	return t, length, true
}
