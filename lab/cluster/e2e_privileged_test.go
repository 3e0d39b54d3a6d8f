//go:build privileged

package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// e2eSubset is the handful of upstream e2e specs the suite runs (make
// e2e-netpol and make e2e-network run them all): NetworkPolicy ingress
// default-deny (TCP and UDP), ports, an egress deny of a whole namespace
// and a namespace whose labels change under a policy; and two sig-network
// conformance specs that need what the harness adds for them: the cluster
// DNS (CoreDNS, dig and getent in agnhost) and kube-apiserver reaching
// pods (pod-routes) with porter's TLS.
var e2eSubset = []string{
	`Netpol NetworkPolicy between server and client should support a 'default-deny-ingress' policy`,
	`Netpol NetworkPolicy between server and client should enforce policy based on Ports`,
	`Netpol NetworkPolicy between server and client should deny egress from all pods in a namespace`,
	`Netpol NetworkPolicy between server and client should allow ingress access from updated namespace`,
	`Netpol \[LinuxOnly\] NetworkPolicy between server and client using UDP should support a 'default-deny-ingress' policy`,
	`\[sig-network\] DNS should provide DNS for services`,
	`\[sig-network\] Proxy version v1 should proxy through a service and a pod`,
}

// TestPrivilegedClusterE2ENetpol runs a few of Kubernetes' own e2e specs
// (e2e.test, hack/build-kube-binaries.sh e2e) against a real cluster with
// the cluster DNS, on the Kubernetes datastore: every selected spec must
// run and pass.
func TestPrivilegedClusterE2ENetpol(t *testing.T) {
	home, _ := os.UserHomeDir()
	e2eBin := envOr("TABBY_KUBE_BIN", filepath.Join(home, ".cache", "tabby-kube", "bin"))
	for _, b := range []string{"e2e.test", "ginkgo", "coredns"} {
		if _, err := os.Stat(filepath.Join(e2eBin, b)); err != nil {
			t.Fatalf("%v: run hack/build-kube-binaries.sh e2e first", err)
		}
	}
	c := testCluster(t, Options{DNS: true})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	r, err := c.RunE2E(ctx, E2EOptions{E2EBin: e2eBin, Focus: strings.Join(e2eSubset, "|"), Procs: 2, Timeout: 8 * time.Minute,
		ReportDir: t.TempDir(), Out: testWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s in %s", r.Summary(), r.Duration.Round(time.Second))
	for _, f := range r.Failures {
		t.Errorf("FAILED %s", f)
	}
	if r.Passed != len(e2eSubset) || r.Skipped != 0 {
		t.Errorf("%s, want %d passed", r.Summary(), len(e2eSubset))
	}
}
