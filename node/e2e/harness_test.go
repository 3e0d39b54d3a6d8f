//go:build privileged && integration

package e2e

import (
	"fmt"
	"github.com/tabbynet/tabby/internal/testlog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tabbynet/tabby/internal/multinode"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// calicoNodeBin builds the calico-node binary once per test binary.
func calicoNodeBin(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tabby-calico-node-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "calico-node")
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(goBin, "build", "-o", binPath, "github.com/tabbynet/tabby/node/cmd/calico-node").CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building calico-node: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var (
	ctlOnce sync.Once
	ctlPath string
	ctlErr  error
)

// calicoctlBin builds the calicoctl binary once per test binary.
func calicoctlBin(t testing.TB) string {
	t.Helper()
	ctlOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tabby-calicoctl-")
		if err != nil {
			ctlErr = err
			return
		}
		ctlPath = filepath.Join(dir, "calicoctl")
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		if out, err := exec.Command(goBin, "build", "-o", ctlPath, "github.com/tabbynet/tabby/calicoctl").CombinedOutput(); err != nil {
			ctlErr = fmt.Errorf("building calicoctl: %v\n%s", err, out)
		}
	})
	if ctlErr != nil {
		t.Fatal(ctlErr)
	}
	return ctlPath
}

// agent is one calico-node process in a node namespace.
type agent struct {
	t    testing.TB
	node *multinode.Node
	dir  string
	env  []string
	cmd  *exec.Cmd
	log  *testlog.Buffer
	done chan struct{}
	// readyFlags are the readiness probe's flags (Calico's manifests:
	// -felix-ready -bird-ready with BIRD, -felix-ready without).
	readyFlags []string
	// inProcess runs node/agent inside this test binary (see
	// inprocess_test.go) instead of the calico-node binary: built with
	// -race, the race detector watches felix, confd and the rest of the
	// agent together.
	inProcess bool
}

// newAgent prepares calico-node for node n with the given extra
// environment (NAME=value); start runs it.
func newAgent(t testing.TB, c *multinode.Cluster, n *multinode.Node, extra ...string) *agent {
	dir := t.TempDir()
	env := []string{
		"PATH=" + os.Getenv("PATH"),
		"DATASTORE_TYPE=etcdv3",
		"ETCD_ENDPOINTS=" + c.Etcd.UnixEndpoint(),
		"NODENAME=" + n.Name,
		"CALICO_NODENAME_FILE=" + filepath.Join(dir, "nodename"),
		"TABBY_BIRD_CONFIG=" + filepath.Join(dir, "bird.cfg"),
		"TABBY_BIRD_SOCKET=" + filepath.Join(dir, "bird.ctl"),
		"TABBY_FELIX_MTU_FILE=" + filepath.Join(dir, "mtu"),
		"FELIX_ENDPOINTSTATUSPATHPREFIX=" + n.StatusPrefix,
		"FELIX_IPV6SUPPORT=false",
		"FELIX_HEALTHENABLED=true",
		"FELIX_DEFAULTENDPOINTTOHOSTACTION=ACCEPT",
		"IP=autodetect",
		"IP_AUTODETECTION_METHOD=interface=eth0",
	}
	a := &agent{t: t, node: n, dir: dir, env: append(env, extra...), readyFlags: []string{"-felix-ready", "-bird-ready"}}
	t.Cleanup(a.cleanup)
	return a
}

// start runs calico-node in the node's namespace.
func (a *agent) start() {
	a.t.Helper()
	a.log = &testlog.Buffer{}
	bin, env := "", a.env
	if a.inProcess {
		self, err := os.Executable()
		if err != nil {
			a.t.Fatal(err)
		}
		bin, env = self, append(slices.Clip(env), inProcessEnv+"=1")
	} else {
		bin = calicoNodeBin(a.t)
	}
	a.cmd = exec.Command("ip", "netns", "exec", a.node.Namespace.Name, bin)
	a.cmd.Env = env
	a.cmd.Stdout, a.cmd.Stderr = a.log, a.log
	if err := a.cmd.Start(); err != nil {
		a.t.Fatalf("starting calico-node on %s: %v", a.node.Name, err)
	}
	a.done = make(chan struct{})
	go func(cmd *exec.Cmd, done chan struct{}) { _ = cmd.Wait(); close(done) }(a.cmd, a.done)
}

// running says the process has not exited.
func (a *agent) running() bool {
	select {
	case <-a.done:
		return false
	default:
		return true
	}
}

// signal sends sig and waits for the process to exit.
func (a *agent) stop(sig syscall.Signal) {
	a.t.Helper()
	if a.cmd == nil || !a.running() {
		return
	}
	_ = a.cmd.Process.Signal(sig)
	select {
	case <-a.done:
	case <-time.After(20 * time.Second):
		_ = a.cmd.Process.Kill()
		<-a.done
		a.t.Errorf("calico-node on %s did not stop within 20s of %v", a.node.Name, sig)
	}
}

func (a *agent) cleanup() {
	start := time.Now()
	a.stop(syscall.SIGTERM)
	a.t.Logf("calico-node on %s stopped in %s", a.node.Name, time.Since(start).Round(time.Millisecond))
	a.killBIRD() // a BIRD left by a kill -9
	if a.t.Failed() && a.log != nil {
		a.t.Logf("calico-node on %s:\n%s", a.node.Name, a.log.String())
	}
}

// birdPid is the pid of the node's BIRD (0 when none runs).
func (a *agent) birdPid() int {
	data, err := os.ReadFile(filepath.Join(a.dir, "bird.pid"))
	if err != nil {
		return 0
	}
	var pid int
	if _, err := fmt.Sscan(string(data), &pid); err != nil || pid <= 1 {
		return 0
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "bird" {
		return 0
	}
	return pid
}

func (a *agent) killBIRD() {
	if pid := a.birdPid(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

// inNode runs a command in the node's namespace with the agent's
// environment; it returns the output and the exit code.
func (a *agent) inNode(name string, args ...string) (string, int) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", a.node.Namespace.Name, name}, args...)...)
	cmd.Env = a.env
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		a.t.Fatalf("%s %v: %v", name, args, err)
	}
	return string(out), code
}

// waitReady waits until `calico-node <readyFlags>` exits 0,
// failing at once if calico-node exited.
func (a *agent) waitReady(within time.Duration) {
	a.t.Helper()
	start := time.Now()
	defer func() {
		a.t.Logf("calico-node on %s ready %s after the wait began", a.node.Name, time.Since(start).Round(time.Millisecond))
	}()
	eventually(a.t, within, "calico-node on "+a.node.Name+" ready (probe exits 0)", func() (bool, string) {
		if !a.running() {
			a.t.Fatalf("calico-node on %s exited: %v", a.node.Name, a.cmd.ProcessState)
		}
		out, code := a.probe(a.readyFlags...)
		return code == 0, out
	})
}

// probe runs `calico-node <flags>` in the node as the kubelet would.
func (a *agent) probe(flags ...string) (string, int) {
	return a.inNode(calicoNodeBin(a.t), flags...)
}

// http GETs a path of the health endpoint: status code and body.
func (a *agent) http(path string) (int, string) {
	out, _ := a.inNode("curl", "-s", "-m", "3", "-w", "\n%{http_code}", "http://localhost:9099"+path)
	i := strings.LastIndexByte(out, '\n')
	var code int
	fmt.Sscan(out[i+1:], &code)
	return code, out[:max(i, 0)]
}

// metrics scrapes felix's metrics port (9091) in the node.
func (a *agent) metrics() string {
	out, _ := a.inNode("curl", "-s", "-m", "3", "http://localhost:9091/metrics")
	return out
}

// grepLines keeps the lines of s containing sub.
func grepLines(s, sub string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, "\n")
}

// eventually polls cond every 100ms until it holds or within passes.
func eventually(t testing.TB, within time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ok, detail := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s (last: %s)", within, what, detail)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
