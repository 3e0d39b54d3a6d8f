package lab

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// DefaultStateDir is where a lab keeps its state unless told otherwise.
const DefaultStateDir = "/run/tabby-lab"

// State is what `up` has built so far. It is saved after every step, so
// that the other verbs (and `down` after a crash) find everything; what
// a crash left unsaved is still found by the prefix.
type State struct {
	// Prefix names everything of the lab: the network namespaces
	// (<prefix>-*) and, as TABBY_LAB_ID=<prefix> in their environment,
	// every process it started.
	Prefix    string `json:"prefix"`
	Datastore string `json:"datastore"`
	// Dataplane is up's --dataplane (iptables, nftables, or "": felix's
	// default).
	Dataplane string `json:"dataplane,omitempty"`
	// Phase is "starting" until up has finished, then "up".
	Phase string `json:"phase"`
	// EtcdUnix is etcd's unix socket endpoint (reachable from every
	// namespace); EtcdURL its loopback one.
	EtcdUnix string `json:"etcdUnix,omitempty"`
	EtcdURL  string `json:"etcdURL,omitempty"`
	// APIServer and Kubeconfig (admin) with --datastore kubernetes.
	APIServer  string `json:"apiServer,omitempty"`
	Kubeconfig string `json:"kubeconfig,omitempty"`
	Model      *Model `json:"model"`
	// KubeControllers: a real cluster's kube-controllers stores
	// Kubernetes NetworkPolicies in the Calico datastore (etcd), so apply
	// writes them to the Kubernetes API whatever the datastore and waits
	// for their Calico form (lab/cluster).
	KubeControllers bool `json:"kubeControllers,omitempty"`
	// VMs: the nodes are VMs (up --vms, vms.go).
	VMs bool `json:"vms,omitempty"`
	// Goldmane is the flow aggregator (up --flows, goldmane.go).
	Goldmane *GoldmaneState `json:"goldmane,omitempty"`
	Nodes    []NodeState    `json:"nodes,omitempty"`
	Pods     []PodState     `json:"pods,omitempty"`
}

// NodeState is one node as built.
type NodeState struct {
	Name   string `json:"name"`
	Netns  string `json:"netns"`
	Subnet int    `json:"subnet"`
	Addr   string `json:"addr"` // eth0's address with prefix length
	// Dir holds the node's agent files (status, BIRD, CNI cache).
	Dir string `json:"dir"`
	// VM is set when the node is a VM (up --vms, vms.go): Netns is then
	// empty and the node is reached through its agent.
	VM *VMNode `json:"vm,omitempty"`
}

// PodState is one pod as built.
type PodState struct {
	Namespace   string `json:"namespace"`
	Name        string `json:"name"`
	Node        string `json:"node"`
	Netns       string `json:"netns"`
	ContainerID string `json:"containerID"`
	IP          string `json:"ip,omitempty"`
	Ports       []Port `json:"ports"`
}

// Key is "<namespace>/<name>".
func (p PodState) Key() string { return p.Namespace + "/" + p.Name }

// ErrNoLab is returned by Open when the folder holds no lab.
var ErrNoLab = errors.New("no lab here: run tabby-lab up first")

// newPrefix returns "tl" and 6 random hex digits: short enough for
// interface and namespace names, unique enough for several labs.
func newPrefix() string { return harness.NewPrefix("tl") }

// readState reads the state of the lab in dir.
func readState(dir string) (*State, error) {
	var s State
	err := harness.LoadJSON(dir, harness.StateFile, &s)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", dir, ErrNoLab)
	}
	if err != nil {
		return nil, fmt.Errorf("the lab's state is unreadable (tabby-lab down still works): %w", err)
	}
	return &s, nil
}

// writeState saves s atomically (a crash leaves the old or the new file).
func writeState(dir string, s *State) error {
	if err := harness.SaveJSON(dir, harness.StateFile, s); err != nil {
		return fmt.Errorf("saving the lab's state: %w", err)
	}
	return nil
}

// readPrefix is the prefix of the lab in dir ("" when there is none).
func readPrefix(dir string) (string, error) {
	b, err := os.ReadFile(filepath.Join(dir, harness.PrefixFile))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	p := string(b)
	if len(p) != 8 || p[:2] != "tl" {
		return "", fmt.Errorf("%s holds %q, not a lab prefix: remove the folder by hand if it is yours", filepath.Join(dir, harness.PrefixFile), p)
	}
	return p, nil
}
