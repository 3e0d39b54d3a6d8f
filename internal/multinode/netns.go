package multinode

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// NetnsDir is where named namespaces live (as `ip netns` keeps them).
const NetnsDir = "/run/netns"

// newPrefix returns a short unique prefix: "tmn" and 6 hex digits.
func newPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "tmn" + hex.EncodeToString(b[:])
}

// Namespace is one named network namespace of the cluster with a netlink
// handle bound to it.
type Namespace struct {
	Name string
	ns.NetNS
	NL *netlink.Handle
}

// newNamespace creates /run/netns/<name> with lo up and removes it when
// the test ends.
func newNamespace(t testing.TB, name string) *Namespace {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("creating netns %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("removing netns %s: %v: %s", name, err, out)
		}
	})
	n, err := ns.GetNS(filepath.Join(NetnsDir, name))
	if err != nil {
		t.Fatalf("opening netns %s: %v", name, err)
	}
	t.Cleanup(func() { _ = n.Close() })
	h, err := netlink.NewHandleAt(netns.NsHandle(int(n.Fd())))
	if err != nil {
		t.Fatalf("netlink handle in %s: %v", name, err)
	}
	t.Cleanup(h.Close)
	nsp := &Namespace{Name: name, NetNS: n, NL: h}
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		t.Fatalf("lo up in %s: %v", name, err)
	}
	return nsp
}

// Sysctl writes value to /proc/sys/<key> (dots or slashes) inside the
// namespace: /proc/sys/net follows the writing thread's namespace.
func (n *Namespace) Sysctl(key, value string) error {
	return n.Do(func(ns.NetNS) error {
		p := filepath.Join("/proc/sys", strings.ReplaceAll(key, ".", "/"))
		if err := os.WriteFile(p, []byte(value), 0o644); err != nil {
			return fmt.Errorf("sysctl %s=%s in %s: %w", key, value, n.Name, err)
		}
		return nil
	})
}

// IP runs `ip -n <ns> args...` and returns its output.
func (n *Namespace) IP(args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"-n", n.Name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ip -n %s %s: %w: %s", n.Name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// Exec runs a command inside the namespace (ip netns exec).
func (n *Namespace) Exec(name string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s in %s: %w: %s", name, strings.Join(args, " "), n.Name, err, out)
	}
	return string(out), nil
}

// Leftovers lists the named namespaces that still carry prefix.
func Leftovers(prefix string) []string {
	ents, _ := os.ReadDir(NetnsDir)
	var out []string
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix+"-") {
			out = append(out, e.Name())
		}
	}
	return out
}
