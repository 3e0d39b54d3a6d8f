package wiring

import (
	"strings"
	"testing"
)

// TestHostVethNames: eth0 keeps Calico's name, every other interface of
// the pod gets its own (Calico's multi-interface calim<N> names for
// net1..net9), all within the kernel's 15 characters.
func TestHostVethNames(t *testing.T) {
	eth0 := HostVethNameForPodInterface("default", "web", "eth0")
	if eth0 != HostVethName("default", "web") {
		t.Fatalf("eth0: %s, want Calico's %s", eth0, HostVethName("default", "web"))
	}
	seen := map[string]string{eth0: "eth0"}
	for _, ifName := range []string{"net1", "net2", "net9", "net10", "eth1", "net0"} {
		n := HostVethNameForPodInterface("default", "web", ifName)
		if len(n) > 15 || !strings.HasPrefix(n, "calim") {
			t.Errorf("%s: %q", ifName, n)
		}
		if prev, dup := seen[n]; dup {
			t.Errorf("%s and %s share %s", ifName, prev, n)
		}
		seen[n] = ifName
	}
	if n := HostVethNameForPodInterface("default", "web", "net1"); !strings.HasPrefix(n, "calim1") {
		t.Errorf("net1: %s, want calim1...", n)
	}
}

func TestOwnerMark(t *testing.T) {
	if m := OwnerMark("k8s-pod-network.abc"); m != "k8s-pod-network.abc" {
		t.Fatalf("short mark %q", m)
	}
	long := strings.Repeat("c", 300)
	if m := OwnerMark(long); len(m) > ifAliasMax || m == OwnerMark(long+"x") {
		t.Fatalf("long mark %q", m)
	}
}
