//go:build privileged

package commands

import (
	"bytes"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/internal/netnstest"
)

// TestPrivilegedNodeDiags runs node diags for real, as root, inside a
// fresh network namespace given an address and a cali- chain: the bundle
// holds that namespace's addresses, routes and iptables rules.
func TestPrivilegedNodeDiags(t *testing.T) {
	n := netnstest.New(t)
	t.Setenv("TMPDIR", t.TempDir())
	err := n.Do(func(ns.NetNS) error {
		for _, c := range [][]string{
			{"ip", "link", "add", "diag0", "type", "veth", "peer", "name", "diag1"},
			{"ip", "link", "set", "diag1", "up"},
			{"ip", "addr", "add", "10.123.45.6/24", "dev", "diag0"},
			{"ip", "link", "set", "diag0", "up"},
			{"iptables", "-N", "cali-diags-test"},
		} {
			if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
				t.Fatalf("%v: %v %s", c, err, out)
			}
		}
		var out bytes.Buffer
		a := &app{stdout: &out, stderr: &out, getenv: func(string) string { return "" }}
		if code := run(a, []string{"node", "diags", "--log-dir", t.TempDir()}); code != 0 {
			t.Fatalf("exit %d:\n%s", code, out.String())
		}
		m := regexp.MustCompile(`Diags saved to (\S+)`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("no bundle:\n%s", out.String())
		}
		_, files := readTarGz(t, m[1])
		if !strings.Contains(files["diagnostics/ipv4_addr"], "10.123.45.6/24") {
			t.Errorf("ipv4_addr lacks the namespace's address:\n%s", files["diagnostics/ipv4_addr"])
		}
		if !strings.Contains(files["diagnostics/ipv4_route"], "10.123.45.0/24 dev diag0") {
			t.Errorf("ipv4_route lacks the namespace's route:\n%s", files["diagnostics/ipv4_route"])
		}
		if !strings.Contains(files["diagnostics/ipv4_tables"], ":cali-diags-test") {
			t.Errorf("ipv4_tables lacks the cali- chain:\n%s", files["diagnostics/ipv4_tables"])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
