package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DefaultStateDir is where a cluster keeps its state unless told otherwise.
const DefaultStateDir = "/run/tabby-cluster"

// Files of the state folder.
const (
	prefixFile = "prefix"     // written first, before anything is created
	stateFile  = "state.json" // State, rewritten after every step of Up
)

// State is what Up has built so far, saved after every step so that the
// other verbs (and Down after a crash) find everything.
type State struct {
	// Prefix names everything of the cluster (see the package comment).
	Prefix string `json:"prefix"`
	// Datastore is Tabby's: kubernetes or etcdv3.
	Datastore string `json:"datastore"`
	// Phase is "starting" until Up has finished, then "up".
	Phase string `json:"phase"`
	// APIServer is the forwarded address on the root namespace's
	// loopback (https://127.0.0.1:port); Etcd the forwarded etcd one.
	APIServer string `json:"apiServer"`
	Etcd      string `json:"etcd"`
	// Kubeconfig is the admin's, for the root namespace.
	Kubeconfig string      `json:"kubeconfig"`
	Nodes      []NodeState `json:"nodes"`
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
	if b, err := os.ReadFile(filepath.Join(dir, prefixFile)); err == nil {
		return "", fmt.Errorf("a cluster (%s) already exists in %s: run `tabby-lab cluster down` first", b, dir)
	}
	var r [3]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", err
	}
	p := "tk" + hex.EncodeToString(r[:])
	return p, os.WriteFile(filepath.Join(dir, prefixFile), []byte(p), 0o644)
}

func (s *State) save(dir string) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, stateFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, stateFile))
}

// loadState reads the state of the cluster in dir.
func loadState(dir string) (*State, error) {
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no cluster in %s: run `make cluster` (or tabby-lab cluster up) first", dir)
	}
	if err != nil {
		return nil, err
	}
	var s State
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, fmt.Errorf("reading %s: %w", filepath.Join(dir, stateFile), err)
	}
	return &s, nil
}
