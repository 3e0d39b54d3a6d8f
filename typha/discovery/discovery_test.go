package discovery

import (
	"context"
	"slices"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/tabbynet/tabby/typha/tlsconfig"
)

func TestSliceAddrs(t *testing.T) {
	name, other, port, port2 := PortName, "metrics", int32(5473), int32(9093)
	yes, no := true, false
	es := discoveryv1.EndpointSlice{
		Ports: []discoveryv1.EndpointPort{{Name: &other, Port: &port2}, {Name: &name, Port: &port}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"10.0.0.1"}, Conditions: discoveryv1.EndpointConditions{Ready: &yes}},
			{Addresses: []string{"10.0.0.2"}, Conditions: discoveryv1.EndpointConditions{Ready: &no}},
			{Addresses: []string{"fd00::3"}},
		},
	}
	got := sliceAddrs(es, PortName, true)
	want := []string{"10.0.0.1:5473", "[fd00::3]:5473"}
	if !slices.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got := sliceAddrs(es, PortName, false); len(got) != 3 {
		t.Errorf("every endpoint, ready or not (rebalancing's count): %v", got)
	}
	es.Ports = es.Ports[:1]
	if got := sliceAddrs(es, PortName, true); got != nil {
		t.Errorf("no calico-typha port: %v", got)
	}
}

func TestAddr(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.1": "10.0.0.1:5473", "typha:6000": "typha:6000"} {
		f, err := Settings{Addr: in}.Addrs(nil)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := f(context.Background()); len(got) != 1 || got[0] != want {
			t.Errorf("%s: got %v, want %s", in, got, want)
		}
	}
	if _, err := (Settings{K8sServiceName: "calico-typha"}).Addrs(nil); err != ErrNeedsKubernetes {
		t.Errorf("service without Kubernetes: %v", err)
	}
}

// TestMissingCertificateFiles: certificate settings naming missing files
// are ignored (the manifests' optional Secret, as Calico's felix); with a
// name to check, TLS is still required and fails.
func TestMissingCertificateFiles(t *testing.T) {
	s := Settings{Addr: "typha:5473", TLS: tlsconfig.Files{CertFile: "/nonexistent/tls.crt", KeyFile: "/nonexistent/tls.key", CAFile: "/nonexistent/ca.crt"}}
	cfg, err := s.Config(nil, Client{})
	if err != nil || cfg.TLS != nil {
		t.Errorf("missing files: %v, TLS %v", err, cfg.TLS != nil)
	}
	s.TLS.CN = "typha-server"
	if _, err := s.Config(nil, Client{}); err == nil {
		t.Error("a Typha CN with missing certificate files accepted")
	}
}
