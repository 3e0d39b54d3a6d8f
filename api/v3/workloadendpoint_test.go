package v3

import (
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestWorkloadEndpointValidation(t *testing.T) {
	base := func() *WorkloadEndpoint {
		return &WorkloadEndpoint{
			ObjectMeta: polMeta("node1-k8s-pod-eth0", "ns"),
			Spec: WorkloadEndpointSpec{
				Node:          "node1",
				Orchestrator:  "k8s",
				Pod:           "pod",
				Endpoint:      "eth0",
				InterfaceName: "cali12345",
				IPNetworks:    []string{"10.65.0.5/32", "fd00::5"},
			},
		}
	}
	dscp := func(v intstr.IntOrString) *QoSControls { return &QoSControls{DSCP: &v} }
	tests := []struct {
		name   string
		modify func(w *WorkloadEndpoint)
		want   string
	}{
		{"base", func(*WorkloadEndpoint) {}, ""},
		{"NAT to a bare-IP network", func(w *WorkloadEndpoint) {
			w.Spec.IPNATs = []IPNAT{{InternalIP: "fd00::5", ExternalIP: "2001:db8::5"}}
		}, ""},
		{"ipNetwork with host bits", func(w *WorkloadEndpoint) {
			w.Spec.IPNetworks = []string{"10.65.0.5/24"}
		}, `spec.ipNetworks[0]: "10.65.0.5/24" has host bits set`},
		{"NAT with an invalid internal IP", func(w *WorkloadEndpoint) {
			w.Spec.IPNATs = []IPNAT{{InternalIP: "nope", ExternalIP: "1.2.3.4"}}
		}, `spec.ipNATs[0].internalIP: "nope" is not a valid IP address`},
		{"wildcard interface is only for host endpoints", func(w *WorkloadEndpoint) {
			w.Spec.InterfaceName = "*"
		}, `spec.interfaceName: "*" is not an interface name`},
		{"host-port-only port needs no name", func(w *WorkloadEndpoint) {
			w.Spec.Ports = []WorkloadEndpointPort{{Protocol: *polProto("TCP"), Port: 80, HostPort: 8080}}
		}, ""},
		{"port without number", func(w *WorkloadEndpoint) {
			w.Spec.Ports = []WorkloadEndpointPort{{Name: "http", Protocol: *polProto("TCP")}}
		}, "spec.ports[0].port: is required"},
		{"hostIP with host bits", func(w *WorkloadEndpoint) {
			w.Spec.Ports = []WorkloadEndpointPort{{Name: "http", Protocol: *polProto("TCP"), Port: 80, HostPort: 80, HostIP: "10.0.0.1/8"}}
		}, `spec.ports[0].hostIP: "10.0.0.1/8" has host bits set`},
		{"spoofed prefix need not be masked", func(w *WorkloadEndpoint) {
			w.Spec.AllowSpoofedSourcePrefixes = []string{"10.9.9.9/16"}
		}, ""},
		{"DSCP number", func(w *WorkloadEndpoint) { w.Spec.QoSControls = dscp(intstr.FromInt32(63)) }, ""},
		{"DSCP number as a string", func(w *WorkloadEndpoint) { w.Spec.QoSControls = dscp(intstr.FromString("10")) }, ""},
		{"DSCP name in lower case", func(w *WorkloadEndpoint) { w.Spec.QoSControls = dscp(intstr.FromString("cs6")) }, ""},
		{"DSCP above 63", func(w *WorkloadEndpoint) { w.Spec.QoSControls = dscp(intstr.FromInt32(64)) }, "spec.qosControls.dscp: 64 is outside 0-63"},
		{"packet rate above its range", func(w *WorkloadEndpoint) {
			w.Spec.QoSControls = &QoSControls{EgressPacketRate: 10001}
		}, "spec.qosControls.egressPacketRate: 10001 is outside 1-10000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := base()
			tc.modify(w)
			w.Default()
			polCheckErrs(t, w.Validate(), tc.want)
		})
	}
}
