package etcdlib

import (
	"os/exec"
	"strings"
	"testing"
)

// TestWhoLinksTheLibrary keeps the split the package exists for: the
// long-running components use etcd's client library, the once-per-pod
// CNI binaries do not link grpc-go at all.
func TestWhoLinksTheLibrary(t *testing.T) {
	deps := func(pkg string) string {
		out, err := exec.Command("go", "list", "-deps", "github.com/tabbynet/tabby/"+pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list %s: %v\n%s", pkg, err, out)
		}
		return string(out)
	}
	for _, pkg := range []string{"felix/cmd/felix", "confd/cmd/confd", "calicoctl"} {
		if !strings.Contains(deps(pkg), "github.com/tabbynet/tabby/datastore/etcd/etcdlib\n") {
			t.Errorf("%s does not use etcd's client library (pass dsconfig.Backends{EtcdTransport: etcdlib.New})", pkg)
		}
	}
	for _, pkg := range []string{"cni-plugin/cmd/calico", "cni-plugin/cmd/calico-ipam"} {
		if d := deps(pkg); strings.Contains(d, "google.golang.org/grpc\n") {
			t.Errorf("%s links grpc-go: its start-up cost is paid on every pod", pkg)
		}
	}
}
