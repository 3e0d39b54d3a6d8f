package lab

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Model is what a lab runs: nodes, pools, namespaces and pods. It is read
// from YAML (see DefaultModel and README.md for the format).
type Model struct {
	Nodes      Nodes       `json:"nodes"`
	Pools      []Pool      `json:"pools,omitempty"`
	Namespaces []Namespace `json:"namespaces,omitempty"`
	Pods       []Pod       `json:"pods,omitempty"`
}

// Nodes is the model's `nodes`: a count or a list of names (each a string
// or {name, subnet}). Subnet (0 or 1) puts a node on the underlay's second
// subnet, behind a router: the CrossSubnet shape.
type Nodes []NodeSpec

// NodeSpec is one node of the model.
type NodeSpec struct {
	Name   string `json:"name"`
	Subnet int    `json:"subnet,omitempty"`
}

// UnmarshalJSON accepts a count, a list of names or a list of NodeSpecs.
func (n *Nodes) UnmarshalJSON(b []byte) error {
	var count int
	if err := json.Unmarshal(b, &count); err == nil {
		*n = NumberedNodes(count)
		return nil
	}
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return fmt.Errorf("nodes: want a count or a list: %w", err)
	}
	out := make(Nodes, 0, len(raw))
	for _, r := range raw {
		var name string
		if err := json.Unmarshal(r, &name); err == nil {
			out = append(out, NodeSpec{Name: name})
			continue
		}
		var s NodeSpec
		if err := json.Unmarshal(r, &s); err != nil {
			return fmt.Errorf("nodes: an entry is neither a name nor {name, subnet}: %w", err)
		}
		out = append(out, s)
	}
	*n = out
	return nil
}

// NumberedNodes is n nodes named node0, node1, ...
func NumberedNodes(n int) Nodes {
	out := make(Nodes, n)
	for i := range out {
		out[i] = NodeSpec{Name: fmt.Sprintf("node%d", i)}
	}
	return out
}

// Pool is an IPPool of the model.
type Pool struct {
	Name string        `json:"name"`
	Spec v3.IPPoolSpec `json:"spec"`
}

// Namespace is a Kubernetes namespace of the model.
type Namespace struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Pod is a pod of the model.
type Pod struct {
	Namespace string            `json:"namespace"`
	Name      string            `json:"name"`
	Labels    map[string]string `json:"labels,omitempty"`
	// Node is where the pod runs; empty: spread over the nodes.
	Node string `json:"node,omitempty"`
	// IP is a fixed address, requested through the pod's
	// cni.projectcalico.org/ipAddrs annotation.
	IP    string `json:"ip,omitempty"`
	Ports []Port `json:"ports,omitempty"`
}

// Port is one port a pod serves, TCP or UDP.
type Port struct {
	Name     string `json:"name,omitempty"`
	Port     int    `json:"port"`
	Protocol string `json:"protocol,omitempty"`
}

// String is "tcp/80".
func (p Port) String() string { return strings.ToLower(p.Protocol) + "/" + fmt.Sprint(p.Port) }

// DefaultPorts are the ports of a pod that names none: 80 and 81 on TCP
// and UDP, as the upstream NetworkPolicy e2e model serves them.
func DefaultPorts() []Port {
	return []Port{
		{Name: "serve-80-tcp", Port: 80, Protocol: "TCP"},
		{Name: "serve-80-udp", Port: 80, Protocol: "UDP"},
		{Name: "serve-81-tcp", Port: 81, Protocol: "TCP"},
		{Name: "serve-81-udp", Port: 81, Protocol: "UDP"},
	}
}

// DefaultPoolCIDR is the pool of a model that names none.
const DefaultPoolCIDR = "10.200.0.0/16"

// DefaultModel is the upstream NetworkPolicy e2e model: namespaces x, y,
// z labelled ns=<name>, pods a, b, c in each labelled pod=<name>, spread
// over 3 nodes, one BGP pool.
func DefaultModel() *Model {
	m := &Model{Nodes: NumberedNodes(3)}
	for _, ns := range []string{"x", "y", "z"} {
		m.Namespaces = append(m.Namespaces, Namespace{Name: ns, Labels: map[string]string{"ns": ns}})
		for _, p := range []string{"a", "b", "c"} {
			m.Pods = append(m.Pods, Pod{Namespace: ns, Name: p, Labels: map[string]string{"pod": p}})
		}
	}
	if err := m.Complete(); err != nil {
		panic(err) // the default model is valid
	}
	return m
}

// LoadModel reads a model file and completes it.
func LoadModel(path string) (*Model, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading the model: %w", err)
	}
	m, err := parseModel(b)
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	return m, nil
}

func parseModel(b []byte) (*Model, error) {
	var m Model
	if err := yaml.UnmarshalStrict(b, &m); err != nil {
		return nil, err
	}
	if err := m.Complete(); err != nil {
		return nil, err
	}
	return &m, nil
}

var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// Complete fills the defaults (3 nodes, the default pool, the default
// ports, namespaces named by pods, pods spread over the nodes in order)
// and refuses what the lab cannot build.
func (m *Model) Complete() error {
	if len(m.Nodes) == 0 {
		m.Nodes = NumberedNodes(3)
	}
	seen := map[string]bool{}
	for i, n := range m.Nodes {
		if !dnsLabel.MatchString(n.Name) || len(n.Name) > 12 {
			return fmt.Errorf("node %d: name %q: use lower-case letters, digits and '-', at most 12", i, n.Name)
		}
		if seen[n.Name] {
			return fmt.Errorf("node %q named twice", n.Name)
		}
		if n.Subnet != 0 && n.Subnet != 1 {
			return fmt.Errorf("node %q: subnet %d: use 0 or 1", n.Name, n.Subnet)
		}
		seen[n.Name] = true
	}
	if len(m.Nodes) > 200 {
		return fmt.Errorf("%d nodes: at most 200", len(m.Nodes))
	}
	if len(m.Pools) == 0 {
		m.Pools = []Pool{{Name: "default-ipv4-ippool", Spec: v3.IPPoolSpec{CIDR: DefaultPoolCIDR,
			IPIPMode: v3.IPIPModeNever, VXLANMode: v3.VXLANModeNever, BlockSize: 26}}}
	}
	for i, p := range m.Pools {
		if p.Name == "" {
			return fmt.Errorf("pool %d has no name", i)
		}
		if _, err := netip.ParsePrefix(p.Spec.CIDR); err != nil {
			return fmt.Errorf("pool %s: cidr: %w", p.Name, err)
		}
	}
	nsSeen := map[string]bool{}
	for _, ns := range m.Namespaces {
		if !dnsLabel.MatchString(ns.Name) {
			return fmt.Errorf("namespace %q: not a DNS label", ns.Name)
		}
		nsSeen[ns.Name] = true
	}
	podSeen := map[string]bool{}
	for i := range m.Pods {
		p := &m.Pods[i]
		if p.Namespace == "" {
			p.Namespace = "default"
		}
		if !dnsLabel.MatchString(p.Name) || !dnsLabel.MatchString(p.Namespace) {
			return fmt.Errorf("pod %s/%s: namespace and name must be DNS labels", p.Namespace, p.Name)
		}
		if podSeen[p.Key()] {
			return fmt.Errorf("pod %s named twice", p.Key())
		}
		podSeen[p.Key()] = true
		if !nsSeen[p.Namespace] {
			m.Namespaces = append(m.Namespaces, Namespace{Name: p.Namespace})
			nsSeen[p.Namespace] = true
		}
		if p.Node == "" {
			p.Node = m.Nodes[i%len(m.Nodes)].Name
		} else if !seen[p.Node] {
			return fmt.Errorf("pod %s: node %q is not in the model", p.Key(), p.Node)
		}
		if p.IP != "" {
			if _, err := netip.ParseAddr(p.IP); err != nil {
				return fmt.Errorf("pod %s: ip: %w", p.Key(), err)
			}
		}
		if len(p.Ports) == 0 {
			p.Ports = DefaultPorts()
		}
		for j := range p.Ports {
			pt := &p.Ports[j]
			if pt.Protocol == "" {
				pt.Protocol = "TCP"
			}
			pt.Protocol = strings.ToUpper(pt.Protocol)
			if pt.Protocol != "TCP" && pt.Protocol != "UDP" {
				return fmt.Errorf("pod %s: port %d: protocol %q: use TCP or UDP", p.Key(), pt.Port, pt.Protocol)
			}
			if pt.Port < 1 || pt.Port > 65535 {
				return fmt.Errorf("pod %s: port %d out of range", p.Key(), pt.Port)
			}
			if pt.Name == "" {
				pt.Name = fmt.Sprintf("serve-%d-%s", pt.Port, strings.ToLower(pt.Protocol))
			}
		}
	}
	return nil
}

// WithNodes returns the model with its nodes replaced by n numbered ones
// (pods spread again unless they named a node that still exists).
func (m *Model) WithNodes(n int) (*Model, error) {
	out := *m
	out.Nodes = NumberedNodes(n)
	out.Pods = slices.Clone(m.Pods)
	for i := range out.Pods {
		out.Pods[i].Node = ""
	}
	if err := out.Complete(); err != nil {
		return nil, err
	}
	return &out, nil
}

// Key is "<namespace>/<name>".
func (p Pod) Key() string { return p.Namespace + "/" + p.Name }
