package v3

import (
	"strings"
	"testing"
)

// TestCalicoValidatorParity holds, for each rule of Calico's validator
// (libcalico-go/lib/validator/v3, its CRD schemas and clientv3's checks)
// that api/v3 was changed to match, a document Calico accepts and one it
// refuses, with the reason Calico gives where it has one. The rules are
// listed in VALIDATION.md.
func TestCalicoValidatorParity(t *testing.T) {
	const gnp = "apiVersion: projectcalico.org/v3\nkind: GlobalNetworkPolicy\nmetadata: {name: p}\nspec:\n  ingress:\n  - "
	const wep = `apiVersion: projectcalico.org/v3
kind: WorkloadEndpoint
metadata: {name: NAME, namespace: default}
spec:
  orchestrator: ORCH
  node: node-1
  pod: web-0
  containerID: abc123
  workload: wl
  endpoint: eth0
  interfaceName: cali0
`
	wepDoc := func(name, orch string) string {
		return strings.NewReplacer("NAME", name, "ORCH", orch).Replace(wep)
	}
	tests := []struct {
		rule, doc, want string // want "" = Calico accepts it
	}{
		// Port names: numorstring.Port's "portName" rule (Kubernetes'
		// IsValidPortName).
		{"port name", gnp + "{action: Allow, protocol: TCP, destination: {ports: [http-alt]}}", ""},
		{"port name", gnp + "{action: Allow, protocol: TCP, destination: {ports: [Bad_Name]}}",
			`spec.ingress[0].destination.ports[0]: "Bad_Name" is not a valid port name`},
		{"port name", gnp + "{action: Allow, protocol: TCP, destination: {ports: [averyverylongname]}}",
			`spec.ingress[0].destination.ports[0]: "averyverylongname" is not a valid port name: must be no more than 15 characters`},
		{"port name", gnp + "{action: Allow, protocol: TCP, destination: {ports: [web--ui]}}",
			`"web--ui" is not a valid port name`},
		// Named ports need no protocol; numbers do.
		{"ports without protocol", gnp + "{action: Allow, destination: {ports: [http]}}", ""},
		{"ports without protocol", gnp + "{action: Allow, destination: {ports: [80]}}",
			"rules with numeric port or port range must set protocol to TCP or UDP or SCTP"},
		// SupportsPorts: TCP, UDP, SCTP only.
		{"protocol with ports", gnp + "{action: Allow, protocol: SCTP, destination: {ports: [80]}}", ""},
		{"protocol with ports", gnp + "{action: Allow, protocol: UDPLite, destination: {ports: [80]}}",
			"rules that specify ports must set protocol to TCP or UDP or SCTP (protocol is UDPLite)"},
		// Protocol names: ^(TCP|UDP|ICMP|ICMPv6|SCTP|UDPLite)$ or 1-255.
		{"protocol name", gnp + "{action: Allow, protocol: ICMPv6}", ""},
		{"protocol name", gnp + "{action: Allow, protocol: \"17\"}", ""},
		{"protocol name", gnp + "{action: Allow, protocol: tcp}", `spec.ingress[0].protocol: protocol name invalid: "tcp" must be spelled "TCP"`},
		{"protocol name", gnp + "{action: Allow, notProtocol: icmpv6}", `spec.ingress[0].notProtocol: protocol name invalid`},
		{"protocol name", "apiVersion: projectcalico.org/v3\nkind: HostEndpoint\nmetadata: {name: h}\nspec: {node: node-1, interfaceName: eth0, ports: [{name: http, protocol: udp, port: 80}]}",
			`spec.ports[0].protocol: protocol name invalid`},
		// Rule nets: cnet.ParseCIDR, so a prefix length is required.
		{"rule nets are CIDRs", gnp + "{action: Allow, source: {nets: [10.0.0.1/32]}}", ""},
		{"rule nets are CIDRs", gnp + "{action: Allow, source: {nets: [10.0.0.1]}}", `spec.ingress[0].source.nets[0]: "10.0.0.1": invalid CIDR`},
		// Catch-all notNets.
		{"catch-all notNets", gnp + "{action: Allow, source: {nets: [0.0.0.0/0]}, destination: {notNets: [10.0.0.0/8]}}", ""},
		{"catch-all notNets", gnp + "{action: Allow, destination: {notNets: [0.0.0.0/0]}}",
			`spec.ingress[0].destination.notNets[0]: "0.0.0.0/0": catch-all CIDR in negation creates logical contradiction (matches no traffic)`},
		{"catch-all notNets", gnp + "{action: Allow, source: {notNets: [\"::0/0\"]}}", "catch-all CIDR in negation"},
		{"catch-all notNets", gnp + "{action: Allow, source: {notNets: [\"0:0:0::/0\"]}}", "catch-all CIDR in negation"},
		// One IP version per rule (validateRule); read all the same.
		{"one IP version per rule", gnp + "{action: Deny, destination: {nets: [0.0.0.0/0, 10.0.0.0/8]}}", ""},
		{"one IP version per rule", gnp + "{action: Deny, destination: {nets: [\"0.0.0.0/0\", \"::/0\"]}}",
			`spec.ingress[0].destination.nets[1]: "::/0" is IPv6 but the rule also matches IPv4 nets`},
		// IPReservation items have format "cidr".
		{"IPReservation cidr format", "apiVersion: projectcalico.org/v3\nkind: IPReservation\nmetadata: {name: r}\nspec: {reservedCIDRs: [10.0.0.1/32, 10.1.0.5/24]}", ""},
		{"IPReservation cidr format", "apiVersion: projectcalico.org/v3\nkind: IPReservation\nmetadata: {name: r}\nspec: {reservedCIDRs: [10.0.0.1]}",
			`spec.reservedCIDRs[0]: "10.0.0.1" should match 'cidr'`},
		// WorkloadEndpoint name from its identifiers (clientv3's
		// assignOrValidateName).
		{"WorkloadEndpoint name", wepDoc("node--1-k8s-web--0-eth0", "k8s"), ""},
		{"WorkloadEndpoint name", wepDoc("node--1-cni-abc123-eth0", "cni"), ""},
		{"WorkloadEndpoint name", wepDoc("node--1-libnetwork-libnetwork-eth0", "libnetwork"), ""},
		{"WorkloadEndpoint name", wepDoc("node--1-openstack-wl-eth0", "openstack"), ""},
		{"WorkloadEndpoint name", wepDoc("node-1-k8s-web-0-eth0", "k8s"),
			"metadata.name: the WorkloadEndpoint name does not match the primary identifiers assigned in the Spec: expected name node--1-k8s-web--0-eth0"},
		{"WorkloadEndpoint name", wepDoc("node--1-cni-other-eth0", "cni"), "expected name node--1-cni-abc123-eth0"},
		{"WorkloadEndpoint name", strings.Replace(wepDoc("x", "k8s"), "  orchestrator: k8s\n", "", 1),
			"spec.orchestrator: field should be assigned"},
		// IPPool CRD rules (x-kubernetes-validations).
		{"IPPool selectors", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 10.9.0.0/16, nodeSelector: all(), namespaceSelector: all(), allowedUses: [Workload]}", ""},
		// allowedUses defaults to Workload and Tunnel before Calico's rules
		// run, so a namespaceSelector needs allowedUses [Workload].
		{"IPPool selectors", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 10.9.0.0/16, namespaceSelector: all()}",
			"spec.namespaceSelector: IP Pool with AllowedUse Tunnel cannot have namespaceSelector"},
		{"IPPool selectors", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 10.9.0.0/16, nodeSelector: global()}",
			"spec.nodeSelector: global() selector is not valid for IPPool nodeSelector"},
		{"IPPool selectors", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 10.9.0.0/16, namespaceSelector: global()}",
			"spec.namespaceSelector: global() selector is not valid for IPPool namespaceSelector"},
		{"IPPool selectors", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p}\nspec: {cidr: 10.9.0.0/16, allowedUses: [Tunnel], namespaceSelector: all()}",
			"spec.namespaceSelector: IP Pool with AllowedUse Tunnel cannot have namespaceSelector"},
		// Annotations on every kind (validateObjectMeta).
		{"metadata annotations", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p, annotations: {example.com/Owner: a}}\nspec: {cidr: 10.9.0.0/16}", ""},
		{"metadata annotations", "apiVersion: projectcalico.org/v3\nkind: IPPool\nmetadata: {name: p, annotations: {\"bad key\": a}}\nspec: {cidr: 10.9.0.0/16}",
			`metadata.annotations["bad key"]: invalid annotation key`},
	}
	for _, tc := range tests {
		name := tc.rule + ": accepted"
		if tc.want != "" {
			name = tc.rule + ": refused"
		}
		t.Run(name, func(t *testing.T) {
			r, err := DecodeOne([]byte(tc.doc))
			if err != nil {
				t.Fatalf("decode: %v", err)
			}
			err = DefaultAndValidate(r)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Calico accepts this; got %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("Calico refuses this (%s); Tabby accepted it", tc.want)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("want an error containing %q, got %v", tc.want, err)
			}
		})
	}
}

// TestWorkloadEndpointNameDefaulted: an endpoint written without a name
// gets the one its spec implies, as Calico's client assigns it.
func TestWorkloadEndpointNameDefaulted(t *testing.T) {
	w := &WorkloadEndpoint{Spec: WorkloadEndpointSpec{Node: "n-1", Orchestrator: "k8s", Pod: "p", Endpoint: "eth0"}}
	w.Default()
	if w.Name != "n--1-k8s-p-eth0" {
		t.Fatalf("name %q, want n--1-k8s-p-eth0", w.Name)
	}
}

// TestProtocolFromStringCanonical: as Calico's, a known name is spelled
// as the API spells it, so what Tabby writes passes Calico's validator.
func TestProtocolFromStringCanonical(t *testing.T) {
	for in, want := range map[string]string{"tcp": "TCP", "Udp": "UDP", "icmpv6": "ICMPv6", "udplite": "UDPLite", "gre": "gre"} {
		if got := numorstringFromString(in); got != want {
			t.Errorf("ProtocolFromString(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestClusterInformationReadOnly: Calico's calicoctl refuses user writes
// of ClusterInformation; other kinds are writable.
func TestClusterInformationReadOnly(t *testing.T) {
	if err := CheckUserWrite(KindClusterInformation, "create or apply"); err == nil ||
		err.Error() != "operation create or apply is not supported on ClusterInformation" {
		t.Fatalf("got %v", err)
	}
	if err := CheckUserWrite(KindIPPool, "create or apply"); err != nil {
		t.Fatalf("IPPool: %v", err)
	}
}

func numorstringFromString(s string) string { return polProto(s).String() }
