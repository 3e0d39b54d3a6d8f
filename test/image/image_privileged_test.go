//go:build privileged

package image

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
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
	a := buildImage(t, tmp, "a")
	b := buildImage(t, tmp, "b")
	if a.digest != b.digest || a.id != b.id || fileHash(t, a.tarball) != fileHash(t, b.tarball) {
		t.Errorf("two builds of the same inputs differ: %+v vs %+v", a, b)
	}
	version, err := os.ReadFile(filepath.Join(repoRoot, "VERSION"))
	if err != nil {
		t.Fatal(err)
	}
	ref := "docker.io/tabbynet/tabby:" + strings.TrimSpace(string(version))

	c := startContainerd(t, tmp)
	out := c.ctr(t, "images", "import", a.tarball)
	if !strings.Contains(out, ref) {
		t.Fatalf("ctr images import did not report %s:\n%s", ref, out)
	}
	// containerd writes its own manifest for a docker archive, so its
	// digest is not make image's; the configuration (the image ID) is.
	if id := c.configOf(t, ref); id != a.id {
		t.Errorf("containerd's %s has configuration %s, the build's image ID is %s", ref, id, a.id)
	}
	for _, tc := range imageCommands() {
		out, err := c.run(t, ref, tc)
		if err != nil && !tc.anyExit {
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

// command is one run in a container of the image.
type command struct {
	args     []string
	env      []string // CNI_COMMAND=VERSION ...
	input    string   // when set, a read-only file at /input in the container
	netAdmin bool     // CAP_NET_ADMIN and CAP_NET_RAW, in the container's own network namespace
	anyExit  bool     // a usage message with a non-zero exit is fine: it ran
	want     []string // every one must appear in the output
}

// felixRules programs what felix's rules use (conntrack, mark, comment,
// multiport, MASQUERADE) through iptables-restore: it only commits if
// every match and target plugin loads and the kernel takes the rules.
const felixRules = `*filter
:FORWARD ACCEPT [0:0]
:cali-test - [0:0]
-A FORWARD -m comment --comment "cali:test" -j cali-test
-A cali-test -m conntrack --ctstate INVALID -j DROP
-A cali-test -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A cali-test -p tcp -m multiport --dports 80,443 -m mark --mark 0x10000/0x10000 -j ACCEPT
COMMIT
*nat
:POSTROUTING ACCEPT [0:0]
-A POSTROUTING -o eth0 -j MASQUERADE --random-fully
COMMIT
`

// imageCommands are the image's programs, each run so it must load every
// library (and iptables its plugins).
func imageCommands() []command {
	cni := []string{"CNI_COMMAND=VERSION"}
	plugins := []string{"-m", "conntrack", "-m", "set", "-m", "multiport", "-j", "MASQUERADE", "-h"}
	pluginHelp := []string{"conntrack match options", "--match-set", "multiport match options", "MASQUERADE target options"}
	return []command{
		{args: []string{"/usr/bin/calico-node", "-h"}, want: []string{"-felix-live"}},
		{args: []string{"/usr/bin/calicoctl", "--help"}, want: []string{"calicoctl"}},
		{args: []string{"/usr/bin/kube-controllers", "-h"}},
		{args: []string{"/usr/bin/check-status", "-h"}, anyExit: true, want: []string{"Usage of check-status"}},
		{args: []string{"/usr/bin/install-cni", "-h"}},
		{args: []string{"/opt/cni/bin/calico"}, env: cni, want: []string{"supportedVersions"}},
		{args: []string{"/opt/cni/bin/calico-ipam"}, env: cni, want: []string{"supportedVersions"}},
		{args: []string{"/opt/cni/bin/calico-k8s"}, env: cni, want: []string{"supportedVersions"}},
		{args: []string{"/opt/cni/bin/portmap"}, env: cni, want: []string{"supportedVersions"}},
		{args: []string{"bird", "--version"}, want: []string{"BIRD version 2."}},
		{args: []string{"birdc", "-s", "/nonexistent"}, anyExit: true, want: []string{"Unable to connect to server control socket"}},
		{args: []string{"iptables", "--version"}, want: []string{"nf_tables"}},
		{args: append([]string{"iptables-nft"}, plugins...), netAdmin: true, want: pluginHelp},
		{args: append([]string{"iptables-legacy"}, plugins...), netAdmin: true, want: pluginHelp},
		{args: []string{"iptables-nft-restore", "/input"}, input: felixRules, netAdmin: true},
		{args: []string{"iptables-legacy-restore", "/input"}, input: felixRules, netAdmin: true},
		{args: []string{"ip6tables-legacy-save", "--version"}, want: []string{"legacy"}},
		{args: []string{"ipset", "--version"}, netAdmin: true, want: []string{"ipset v7"}},
		{args: []string{"conntrack", "--version"}, want: []string{"conntrack v1"}},
		{args: []string{"ip", "-V"}, want: []string{"iproute2", "libbpf"}},
		{args: []string{"modprobe", "--version"}, want: []string{"kmod version"}},
	}
}

func goBin() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// built is one build's output.
type built struct {
	digest, id, tarball string
}

// buildImage runs hack/imagebuild as make image does, with its own
// binaries folder and tarball: the digest it printed last, the image ID
// from its first line, the tarball.
func buildImage(t *testing.T, tmp, name string) built {
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
	_, id, _ := strings.Cut(lines[0], "image ID ")
	id, _, _ = strings.Cut(id, ",")
	if !strings.HasPrefix(id, "sha256:") {
		t.Fatalf("imagebuild's first line names no image ID: %q", lines[0])
	}
	t.Logf("build %s: %s in %v (%s)", name, digest, time.Since(start).Round(time.Millisecond), lines[0])
	return built{digest: digest, id: id, tarball: out}
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
	sock, ns, dir string
}

func startContainerd(t *testing.T, tmp string) *containerd {
	t.Helper()
	netns := netnstest.New(t)
	dir := filepath.Join(tmp, "containerd")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c := &containerd{sock: filepath.Join(dir, "containerd.sock"), ns: "tabby-image-test", dir: dir}
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

// configOf returns the configuration digest of the image ref as
// containerd stores it.
func (c *containerd) configOf(t *testing.T, ref string) string {
	t.Helper()
	var digest string
	for _, line := range strings.Split(c.ctr(t, "images", "ls"), "\n") {
		if f := strings.Fields(line); len(f) >= 3 && f[0] == ref {
			digest = f[2]
		}
	}
	if digest == "" {
		t.Fatalf("containerd lists no %s", ref)
	}
	var m struct {
		Config struct {
			Digest string `json:"digest"`
		} `json:"config"`
	}
	if err := json.Unmarshal([]byte(c.ctr(t, "content", "get", digest)), &m); err != nil {
		t.Fatalf("containerd's manifest %s: %v", digest, err)
	}
	return m.Config.Digest
}

// run runs one command in a fresh container of the image (its own
// network namespace; removed after) and returns its output. Output goes
// through a log file and the command has no stdin: ctr run can leave a
// program reading stdin waiting for an EOF that never comes.
func (c *containerd) run(t *testing.T, ref string, cmd command) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	id := fmt.Sprintf("t%d", time.Now().UnixNano())
	logFile := filepath.Join(c.dir, id+".log")
	full := []string{"--address", c.sock, "-n", c.ns, "run", "--rm", "--log-uri", "file://" + logFile}
	for _, e := range cmd.env {
		full = append(full, "--env", e)
	}
	if cmd.netAdmin {
		full = append(full, "--cap-add", "CAP_NET_ADMIN", "--cap-add", "CAP_NET_RAW")
	}
	if cmd.input != "" {
		in := filepath.Join(c.dir, id+".input")
		if err := os.WriteFile(in, []byte(cmd.input), 0o644); err != nil {
			t.Fatal(err)
		}
		full = append(full, "--mount", "type=bind,src="+in+",dst=/input,options=rbind:ro")
	}
	out, err := exec.CommandContext(ctx, "ctr", append(append(full, ref, id), cmd.args...)...).CombinedOutput()
	logged, _ := os.ReadFile(logFile)
	return string(out) + string(logged), err
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
