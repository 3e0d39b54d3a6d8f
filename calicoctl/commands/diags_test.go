package commands

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"
)

// readTarGz returns the archive's entries and regular files' contents.
func readTarGz(t *testing.T, path string) (names []string, files map[string]string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	files = map[string]string{}
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return names, files
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[h.Name] = string(b)
		}
	}
}

// TestNodeDiags: node diags runs Calico's commands (a failing one is
// reported and the rest go on), copies the log directory and leaves
// diags-<time>.tar.gz with a diagnostics/ tree in its temp directory;
// without root it refuses, as Calico's does.
func TestNodeDiags(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	prev := defaultBirdSockets
	defaultBirdSockets = nil // whether this host runs BIRD must not matter
	t.Cleanup(func() { defaultBirdSockets = prev })
	logs := t.TempDir()
	os.MkdirAll(filepath.Join(logs, "felix"), 0o755)
	os.WriteFile(filepath.Join(logs, "felix", "current"), []byte("felix log line\n"), 0o644)
	var ran []string
	var out bytes.Buffer
	a := &app{stdout: &out, stderr: &out, getenv: func(string) string { return "" },
		getuid: func() int { return 0 },
		clock:  func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) },
		runCmd: func(_ context.Context, name string, args ...string) ([]byte, error) {
			cmd := strings.Join(append([]string{name}, args...), " ")
			ran = append(ran, cmd)
			if name == "nft" {
				return []byte("nft: command not found"), errors.New("exit status 127")
			}
			return []byte("output of " + cmd + "\n"), nil
		}}
	if code := run(a, []string{"node", "diags", "--log-dir", logs}); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	for _, want := range []string{"date", "hostname", "ip -4 route", "ip -6 route", "ip -4 addr", "ip -6 addr", "nft -n -a list ruleset",
		"iptables-save -c", "ip6tables-save -c", "ipset list", "journalctl -u calico-node.service --no-pager"} {
		if !slices.Contains(ran, want) {
			t.Errorf("did not run %q (ran %q)", want, ran)
		}
	}
	m := regexp.MustCompile(`Diags saved to (\S+)`).FindStringSubmatch(out.String())
	if m == nil || filepath.Base(m[1]) != "diags-20260102_030405.tar.gz" {
		t.Fatalf("no bundle named:\n%s", out.String())
	}
	names, files := readTarGz(t, m[1])
	for _, want := range []string{"diagnostics/", "diagnostics/ipv4_route", "diagnostics/ipv4_tables", "diagnostics/ipsets", "diagnostics/nft_ruleset", "diagnostics/logs/felix/current"} {
		if !slices.Contains(names, want) {
			t.Errorf("bundle lacks %s (has %q)", want, names)
		}
	}
	if files["diagnostics/ipv4_route"] != "output of ip -4 route\n" || files["diagnostics/logs/felix/current"] != "felix log line\n" {
		t.Errorf("bundle contents: %q", files)
	}
	tmp := regexp.MustCompile(`Using temp dir: (\S+)`).FindStringSubmatch(out.String())
	got := strings.ReplaceAll(strings.ReplaceAll(out.String(), tmp[1], "<tmp>"), logs, "<logs>")
	got = regexp.MustCompile(`Dumping (ss|netstat)\n`).ReplaceAllString(got, "Dumping <sockets>\n")
	want := `Collecting diagnostics
Using temp dir: <tmp>
Dumping routes (IPv4)
Dumping routes (IPv6)
Dumping interface info (IPv4)
Dumping interface info (IPv6)
Dumping nftables
Failed to run command: nft -n -a list ruleset
Error: nft: command not found exit status 127
Dumping iptables (IPv4)
Dumping iptables (IPv6)
Dumping ipsets
Copying journal for calico-node.service
Dumping <sockets>
Copying Calico logs

Diags saved to <tmp>/diags-20260102_030405.tar.gz
If required, you can upload the diagnostics bundle to a file sharing service.
`
	if got != want {
		t.Errorf("output:\n%s\nwant:\n%s", got, want)
	}

	out.Reset()
	a.getuid = func() int { return 1000 }
	if code := run(a, []string{"node", "diags"}); code == 0 || !strings.Contains(out.String(), "Need super user privileges: Operation not permitted") {
		t.Errorf("non-root: exit %d:\n%s", code, out.String())
	}
}
