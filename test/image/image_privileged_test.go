//go:build privileged

package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tabbynet/tabby/internal/netnstest"
)

const repoRoot = "../.."

// TestPrivilegedImageRuns builds the image twice (same digest, same
// tarball bytes), imports it into a private containerd running in a
// fresh network namespace and runs each tool of the image in a container
// from it: the static binaries, bird, iptables (nft and legacy, loading
// their match and target plugins), ipset, conntrack, ip and kmod.
func TestPrivilegedImageRuns(t *testing.T) {
	netnstest.RequireRoot(t)
	tmp := t.TempDir()
	digest, tarball := buildImage(t, tmp, "a")
	digest2, tarball2 := buildImage(t, tmp, "b")
	if digest != digest2 || fileHash(t, tarball) != fileHash(t, tarball2) {
		t.Errorf("two builds of the same inputs differ: %s vs %s", digest, digest2)
	}
	version, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	ref := "docker.io/tabbynet/tabby:" + strings.TrimSpace(string(version))

	c := startContainerd(t, tmp)
	out := c.ctr(t, "images", "import", tarball)
	if !strings.Contains(out, ref) {
		t.Fatalf("ctr images import did not report %s:\n%s", ref, out)
	}
	for _, tc := range []struct {
		args []string
		want []string // every one must appear in the output
	}{
		{[]string{"/usr/bin/calico-node", "-h"}, []string{"-felix-live"}},
		{[]string{"/usr/bin/calicoctl", "--help"}, []string{"calicoctl"}},
		{[]string{"/usr/bin/kube-controllers", "-h"}, nil},
		{[]string{"/usr/bin/check-status", "-h"}, nil},
		{[]string{"/usr/bin/install-cni", "-h"}, nil},
		{[]string{"/opt/cni/bin/calico", "version"}, []string{"CNI"}},
		{[]string{"/opt/cni/bin/calico-ipam", "version"}, []string{"CNI"}},
		{[]string{"/opt/cni/bin/calico-k8s", "version"}, []string{"CNI"}},
		{[]string{"/opt/cni/bin/portmap", "version"}, []string{"CNI"}},
		{[]string{"bird", "--version"}, []string{"BIRD version 2."}},
		{[]string{"birdc", "--version"}, []string{"BIRD version 2."}},
		{[]string{"iptables", "--version"}, []string{"nf_tables"}},
		{[]string{"iptables-nft", "-m", "conntrack", "-m", "set", "-j", "MASQUERADE", "-h"},
			[]string{"conntrack match options", "--match-set", "MASQUERADE target options"}},
		{[]string{"iptables-legacy", "-m", "conntrack", "-m", "set", "-j", "MASQUERADE", "-h"},
			[]string{"conntrack match options", "--match-set", "MASQUERADE target options"}},
		{[]string{"ip6tables-legacy-restore", "--version"}, []string{"legacy"}},
		{[]string{"iptables-nft-save", "--version"}, []string{"nf_tables"}},
		{[]string{"ipset", "--version"}, []string{"ipset v7"}},
		{[]string{"conntrack", "--version"}, []string{"conntrack v1"}},
		{[]string{"ip", "-V"}, []string{"iproute2"}},
		{[]string{"modprobe", "--version"}, []string{"kmod version"}},
	} {
		out, err := c.run(t, ref, tc.args...)
		if err != nil {
			t.Errorf("%v in the image: %v\n%s", tc.args, err, out)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v in the image: no %q in\n%s", tc.args, w, out)
			}
		}
	}
}

func goBin() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// buildImage runs hack/imagebuild as make image does, with its own
// binaries folder and tarball, and returns the digest it printed last.
func buildImage(t *testing.T, tmp, name string) (string, string) {
	t.Helper()
	out := filepath.Join(tmp, name+".tar")
	cmd := exec.Command(goBin(), "run", "./hack/imagebuild", "-go", goBin(),
		"-bin", filepath.Join(tmp, "bin-"+name), "-out", out)
	cmd.Dir = repoRoot
	cmd.Env = append(os.Environ(), "SOURCE_DATE_EPOCH=1764892800")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("imagebuild: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	digest := lines[len(lines)-1]
	if !strings.HasPrefix(digest, "sha256:") || len(digest) != 71 {
		t.Fatalf("imagebuild's last line is not a digest: %q", digest)
	}
	t.Logf("build %s: %s in %v (%s)", name, digest, time.Since(start).Round(time.Millisecond), lines[0])
	return digest, out
}

func fileHash(t *testing.T, p string) string {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

// containerd is a private containerd: its own root, state, socket and
// configuration under the test's folder, in a fresh network namespace
// and a private mount namespace (a tmpfs on /run/containerd for the
// shims' sockets), so nothing of it is visible to the host's.
type containerd struct {
	sock, ns string
}

func startContainerd(t *testing.T, tmp string) *containerd {
	t.Helper()
	netns := netnstest.New(t)
	dir := filepath.Join(tmp, "containerd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := &containerd{sock: filepath.Join(dir, "containerd.sock"), ns: "tabby-image-test"}
	conf := fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.grpc.v1.cri"]
[grpc]
  address = %q
[ttrpc]
  address = %q
[plugins."io.containerd.internal.v1.opt"]
  path = %q
`, filepath.Join(dir, "root"), filepath.Join(dir, "state"), c.sock, c.sock+".ttrpc", filepath.Join(dir, "opt"))
	confPath := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(confPath, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll("/run/containerd", 0o711); err != nil {
		t.Fatal(err)
	}
	var logBuf bytes.Buffer
	cmd := exec.Command("nsenter", "--net="+netns.Path(), "--", "unshare", "--mount", "--propagation", "private", "--",
		"sh", "-c", `mount -t tmpfs tmpfs /run/containerd && exec containerd --config "$0"`, confPath)
	cmd.Stdout, cmd.Stderr = &logBuf, &logBuf
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting containerd: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() {
		c.cleanup()
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if t.Failed() {
			t.Logf("containerd's log:\n%s", logBuf.String())
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := exec.Command("ctr", "--address", c.sock, "version").CombinedOutput(); err == nil {
			return c
		}
		select {
		case err := <-done:
			t.Fatalf("containerd exited: %v\n%s", err, logBuf.String())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd did not answer on %s in 30 s:\n%s", c.sock, logBuf.String())
		}
	}
}

func (c *containerd) ctr(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ctr", append([]string{"--address", c.sock, "-n", c.ns}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("ctr %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// run runs one command in a fresh container of the image (removed
// after) and returns its output.
func (c *containerd) run(t *testing.T, ref string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := fmt.Sprintf("t%d", time.Now().UnixNano())
	full := append([]string{"--address", c.sock, "-n", c.ns, "run", "--rm", ref, id}, args...)
	out, err := exec.CommandContext(ctx, "ctr", full...).CombinedOutput()
	return string(out), err
}

// cleanup removes what the test left in containerd (containers of a
// failed run), best effort: the containerd goes away with the test.
func (c *containerd) cleanup() {
	out, _ := exec.Command("ctr", "--address", c.sock, "-n", c.ns, "containers", "ls", "-q").Output()
	for _, id := range strings.Fields(string(out)) {
		_ = exec.Command("ctr", "--address", c.sock, "-n", c.ns, "tasks", "kill", "-s", "SIGKILL", id).Run()
		_ = exec.Command("ctr", "--address", c.sock, "-n", c.ns, "tasks", "delete", "-f", id).Run()
		_ = exec.Command("ctr", "--address", c.sock, "-n", c.ns, "containers", "delete", id).Run()
	}
}
