package lab

import (
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v3 "github.com/tabbynet/tabby/api/v3"
)

func TestDefaultModelIsTheUpstreamE2EModel(t *testing.T) {
	m := DefaultModel()
	if len(m.Nodes) != 3 || len(m.Pods) != 9 || len(m.Namespaces) != 3 {
		t.Fatalf("nodes %d, pods %d, namespaces %d; want 3, 9, 3", len(m.Nodes), len(m.Pods), len(m.Namespaces))
	}
	want := Pool{Name: "default-ipv4-ippool", Spec: v3.IPPoolSpec{CIDR: "10.200.0.0/16", IPIPMode: v3.IPIPModeNever, VXLANMode: v3.VXLANModeNever, BlockSize: 26}}
	if diff := cmp.Diff([]Pool{want}, m.Pools); diff != "" {
		t.Errorf("pools (-want +got):\n%s", diff)
	}
	perNode := map[string]int{}
	for _, p := range m.Pods {
		perNode[p.Node]++
		if p.Labels["pod"] != p.Name {
			t.Errorf("pod %s labels %v", p.Key(), p.Labels)
		}
		var ports []string
		for _, pt := range p.Ports {
			ports = append(ports, pt.Name)
		}
		if got := strings.Join(ports, ","); got != "serve-80-tcp,serve-80-udp,serve-81-tcp,serve-81-udp" {
			t.Errorf("pod %s ports %s", p.Key(), got)
		}
	}
	if diff := cmp.Diff(map[string]int{"node0": 3, "node1": 3, "node2": 3}, perNode); diff != "" {
		t.Errorf("pods per node (-want +got):\n%s", diff)
	}
	if got := m.networkingBackend(); got != "bird" {
		t.Errorf("backend %s, want bird (BGP)", got)
	}
}

func TestLoadExampleModel(t *testing.T) {
	m, err := LoadModel("examples/model.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Nodes{{Name: "node0"}, {Name: "node1"}, {Name: "node2", Subnet: 1}}, m.Nodes); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if m.Pools[0].Spec.VXLANMode != v3.VXLANModeCrossSubnet || m.networkingBackend() != "vxlan" {
		t.Errorf("pool %+v, backend %s", m.Pools[0].Spec, m.networkingBackend())
	}
	pg := m.Pods[2]
	if pg.IP != "10.210.99.5" || len(pg.Ports) != 1 || pg.Ports[0].String() != "tcp/5432" || pg.Node != "node2" {
		t.Errorf("postgres: %+v", pg)
	}
	if m.Pods[0].Node != "node0" || m.Pods[1].Node != "node2" {
		t.Errorf("placement: web on %s, api on %s", m.Pods[0].Node, m.Pods[1].Node)
	}
}

func TestModelRefusals(t *testing.T) {
	for _, tc := range []struct{ yaml, want string }{
		{"nodes: [a, a]", "named twice"},
		{"nodes: [{name: a, subnet: 2}]", "use 0 or 1"},
		{"pods: [{name: p, node: nowhere}]", "not in the model"},
		{"pods: [{name: p, ports: [{port: 80, protocol: SCTP}]}]", "use TCP or UDP"},
		{"pods: [{name: p}, {name: p}]", "named twice"},
		{"pods: [{name: p, ip: not-an-ip}]", "ip"},
		{"pools: [{name: p, spec: {cidr: bad}}]", "cidr"},
		{"nodez: 3", "unknown field"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			_, err := parseModel([]byte(tc.yaml))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%q: %v, want an error with %q", tc.yaml, err, tc.want)
			}
		})
	}
}

func TestNodesFlag(t *testing.T) {
	m, err := DefaultModel().WithNodes(2)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Nodes) != 2 || m.Pods[8].Node != "node0" {
		t.Errorf("nodes %v, last pod on %s", m.Nodes, m.Pods[8].Node)
	}
}

func TestParsePorts(t *testing.T) {
	got, err := ParsePorts("tcp/80, UDP/81")
	if err != nil || len(got) != 2 || got[0].String() != "tcp/80" || got[1].String() != "udp/81" {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"", "sctp/80", "tcp/0", "tcp80", "tcp/x"} {
		if _, err := ParsePorts(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestSplitDocumentsRefusesUnknownKinds(t *testing.T) {
	_, err := splitDocuments([]byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	if err == nil || !strings.Contains(err.Error(), "ConfigMap") {
		t.Fatalf("%v", err)
	}
	docs, err := splitDocuments(readFile(t, "examples/deny-x-allow-from-y.yaml"))
	if err != nil || len(docs) != 2 {
		t.Fatalf("%d docs, %v", len(docs), err)
	}
}

func TestMatrix(t *testing.T) {
	res := []ProbeResult{{From: "x/a", To: "x/b", Port: "tcp/80", Allowed: true}, {From: "x/b", To: "x/a", Port: "tcp/80"}}
	want := "tcp/80\n       x/a  x/b \nx/a    -    .   \nx/b    X    -   \n"
	if got := Matrix(res); got != want {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
	if got := res[1].String(); got != "x/b -> x/a tcp/80 deny" {
		t.Errorf("line %q", got)
	}
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
