package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// DefaultStateDir is where a cluster keeps its state unless told otherwise.
const DefaultStateDir = "/run/tabby-cluster"

// State is what Up has built so far, saved after every step so that the
// other verbs (and Down after a crash) find everything.
type State struct {
	// Prefix names everything of the cluster (see the package comment).
	Prefix string `json:"prefix"`
	// Datastore is Tabby's: kubernetes or etcdv3.
	Datastore string `json:"datastore"`
	// DNS: CoreDNS runs as the cluster DNS (Options.DNS).
	DNS bool `json:"dns,omitempty"`
	// Phase is "starting" until Up has finished, then "up".
	Phase string `json:"phase"`
	// APIServer is the forwarded address on the root namespace's
	// loopback (https://127.0.0.1:port); Etcd the forwarded etcd one.
	APIServer string `json:"apiServer"`
	Etcd      string `json:"etcd"`
	// Kubeconfig is the admin's, for the root namespace.
	Kubeconfig string      `json:"kubeconfig"`
	Nodes      []NodeState `json:"nodes"`
	// VMNodes are the nodes that are qemu VMs (Options.VMNodes).
	VMNodes []VMNodeState `json:"vmNodes,omitempty"`
	// Image is the Tabby image the manifest was applied with.
	Image string `json:"image,omitempty"`
}

// NodeState is one node as built.
type NodeState struct {
	Name   string `json:"name"`
	Netns  string `json:"netns"`
	Addr   string `json:"addr"` // eth0's address with prefix length
	Subnet int    `json:"subnet"`
	// Holder is the PID of the process holding the node's mount namespace.
	Holder int    `json:"holder"`
	Dir    string `json:"dir"`
}

// newPrefix makes and records the state folder's prefix, before anything
// is created, so that Down finds what a crash left behind.
func newPrefix(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if b, err := os.ReadFile(filepath.Join(dir, harness.PrefixFile)); err == nil {
		return "", fmt.Errorf("a cluster (%s) already exists in %s: run `tabby-lab cluster down` first", b, dir)
	}
	p := harness.NewPrefix("tk")
	return p, os.WriteFile(filepath.Join(dir, harness.PrefixFile), []byte(p), 0o644)
}

func (s *State) save(dir string) error { return harness.SaveJSON(dir, harness.StateFile, s) }

// loadState reads the state of the cluster in dir.
func loadState(dir string) (*State, error) {
	var s State
	err := harness.LoadJSON(dir, harness.StateFile, &s)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no cluster in %s: run `make cluster` (or tabby-lab cluster up) first", dir)
	}
	if err != nil {
		return nil, err
	}
	return &s, nil
}
