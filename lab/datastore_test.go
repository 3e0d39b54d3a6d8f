package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// up refuses a datastore whose servers are not built, before anything
// starts, naming the exact command: etcd alone for the default lab, the
// full build only for the Kubernetes datastore.
func TestServersPresent(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("TABBY_KUBE_BIN", dir)
	err := serversPresent(DatastoreEtcd)
	if err == nil || !strings.Contains(err.Error(), "needs etcd in "+dir) || !strings.Contains(err.Error(), "run hack/build-kube-binaries.sh etcd ") {
		t.Fatalf("etcd missing: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := serversPresent(DatastoreEtcd); err != nil {
		t.Fatalf("etcd present: %v", err)
	}
	err = serversPresent(DatastoreKubernetes)
	if err == nil || !strings.Contains(err.Error(), "needs kube-apiserver in "+dir) || !strings.Contains(err.Error(), "run hack/build-kube-binaries.sh (") {
		t.Fatalf("kube-apiserver missing: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "kube-apiserver"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := serversPresent(DatastoreKubernetes); err != nil {
		t.Fatalf("both present: %v", err)
	}
}
