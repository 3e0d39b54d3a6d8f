//go:build privileged

package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/internal/netnstest"
)

var (
	buildOnce sync.Once
	binDir    string
	buildErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		_ = os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// labBin builds the lab's binaries once per test binary, as make build
// does ($TABBY_LAB_BIN: use the ones already built there).
func labBin(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TABBY_LAB_BIN"); d != "" {
		return d
	}
	buildOnce.Do(func() {
		binDir, buildErr = os.MkdirTemp("", "tabby-lab-bin-")
		if buildErr != nil {
			return
		}
		goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
		pkgs := []string{"./lab/cmd/tabby-lab", "./node/cmd/calico-node", "./cni-plugin/cmd/calico",
			"./cni-plugin/cmd/calico-ipam", "./cni-plugin/cmd/calico-k8s", "./calicoctl", "./goldmane/cmd/goldmane"}
		cmd := exec.Command(goBin, append([]string{"build", "-o", binDir + "/"}, pkgs...)...)
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building the lab's binaries: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binDir
}

// stateDir is a fresh state folder (short: BIRD's control socket lives
// in it) whose lab is taken down when the test ends.
func stateDir(t testing.TB) string {
	t.Helper()
	d, err := os.MkdirTemp("/tmp", "tl")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := Down(d); err != nil {
			t.Errorf("down: %v", err)
		}
	})
	return d
}

type logWriter struct{ t testing.TB }

func (w logWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// upLab builds a lab and returns it with the time up started.
func upLab(t testing.TB, m *Model, datastore string) (*Lab, time.Time) {
	t.Helper()
	netnstest.RequireRoot(t)
	bin := labBin(t)
	dir := stateDir(t)
	start := time.Now()
	l, err := Up(context.Background(), UpOptions{Dir: dir, Bin: bin, Model: m, Datastore: datastore, Out: logWriter{t}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l, start
}

// downAndCheck takes the lab down and checks nothing of it is left.
func downAndCheck(t testing.TB, l *Lab) {
	t.Helper()
	prefix := l.State.Prefix
	l.Close()
	if err := Down(l.Dir); err != nil {
		t.Fatal(err)
	}
	if left := Leftovers(prefix); len(left) > 0 {
		t.Errorf("left after down: %v", left)
	}
	if _, err := os.Stat(l.Dir); !os.IsNotExist(err) {
		t.Errorf("state folder %s still there after down (%v)", l.Dir, err)
	}
}

// verdict is the expected fate of one probe.
type verdict func(r ProbeResult) bool

func allAllowed(ProbeResult) bool { return true }

// sampleVerdict is the fate of traffic under examples/deny-x-allow-from-y:
// into x only from y.
func sampleVerdict(r ProbeResult) bool {
	return namespaceOf(r.To) != "x" || namespaceOf(r.From) == "y"
}

func namespaceOf(key string) string { ns, _, _ := strings.Cut(key, "/"); return ns }

// mismatches lists the probes whose result differs from want.
func mismatches(res []ProbeResult, want verdict) []string {
	var out []string
	for _, r := range res {
		if r.Allowed != want(r) {
			out = append(out, fmt.Sprintf("%s (want %v: %s)", r, want(r), r.Detail))
		}
	}
	return out
}

// probeUntil probes until every probe's result is as wanted (or fails
// after within) and returns the number of rounds and of probes per round.
func probeUntil(t testing.TB, l *Lab, want verdict, within time.Duration) (rounds, probes int) {
	t.Helper()
	deadline := time.Now().Add(within)
	for round := 1; ; round++ {
		res, err := l.Probe(context.Background(), nil, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		bad := mismatches(res, want)
		if len(bad) == 0 {
			return round, len(res)
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s, %d of %d probes not as expected:\n%s", within, len(bad), len(res), strings.Join(bad, "\n"))
		}
	}
}

// probeExactly probes once: the result must be as wanted at once.
func probeExactly(t testing.TB, l *Lab, want verdict) []ProbeResult {
	t.Helper()
	res, err := l.Probe(context.Background(), nil, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if bad := mismatches(res, want); len(bad) > 0 {
		diagnose(t, l)
		t.Fatalf("%d of %d probes not as expected:\n%s\n%s", len(bad), len(res), strings.Join(bad, "\n"), Matrix(res))
	}
	return res
}

// diagnose logs, for a probe table that is not as expected, each node's
// UDP conntrack entries, its filter table and the end of its calico-node
// log: enough to tell a stale flow from a rule felix did not program.
func diagnose(t testing.TB, l *Lab) {
	t.Helper()
	var pods []string
	for _, p := range l.State.Pods {
		pods = append(pods, p.Key()+" "+p.IP+" on "+p.Node)
	}
	t.Logf("pods: %s", strings.Join(pods, ", "))
	for _, n := range l.State.Nodes {
		run := dataplane.ExecRunner{NetnsPath: netnsPath(n.Netns)}
		ct, err := run.Run(context.Background(), "conntrack", []string{"-L", "-p", "udp"}, nil)
		t.Logf("node %s: conntrack -L -p udp (err %v):\n%s", n.Name, err, ct)
		ipt, err := run.Run(context.Background(), "iptables-save", []string{"-c", "-t", "filter"}, nil)
		t.Logf("node %s: iptables-save -c -t filter (err %v):\n%s", n.Name, err, ipt)
		log, err := os.ReadFile(filepath.Join(l.Dir, "logs", agentLog(&n)+".log"))
		lines := strings.Split(strings.TrimSpace(string(log)), "\n")
		t.Logf("node %s: calico-node log, last lines (err %v):\n%s", n.Name, err, strings.Join(lines[max(0, len(lines)-40):], "\n"))
	}
}

func readExample(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// applyAndWait applies (or deletes) a file and waits for every node.
func applyAndWait(t testing.TB, l *Lab, data []byte, del bool) {
	t.Helper()
	start := time.Now()
	refs, err := l.Apply(context.Background(), data, del)
	if err != nil {
		t.Fatal(err)
	}
	written := time.Now()
	if err := l.WaitProgrammed(context.Background(), refs, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	t.Logf("apply (delete %v) of %d resources: written in %s, programmed on every node %s later", del, len(refs),
		written.Sub(start).Round(time.Millisecond), time.Since(written).Round(time.Millisecond))
}

// calicoVerdict is the fate of traffic under testdata/gnp-deny-udp81-to-c.
func calicoVerdict(r ProbeResult) bool {
	return !(strings.HasSuffix(r.To, "/c") && r.Port == "udp/81")
}

// calicoStory applies a GlobalNetworkPolicy through calicoctl: the table
// as expected on the first probe after apply returns; deleted, all allowed.
func calicoStory(t *testing.T, l *Lab) {
	t.Helper()
	gnp, err := os.ReadFile("testdata/gnp-deny-udp81-to-c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	applyAndWait(t, l, gnp, false)
	probeExactly(t, l, calicoVerdict)
	// An edit (read back from the datastore by the wait): UDP 80 instead.
	edited := bytes.Replace(gnp, []byte("ports: [81]"), []byte("ports: [80]"), 1)
	if bytes.Equal(edited, gnp) {
		t.Fatal("the GlobalNetworkPolicy's ports line moved: the edit changes nothing")
	}
	applyAndWait(t, l, edited, false)
	probeExactly(t, l, func(r ProbeResult) bool { return !(strings.HasSuffix(r.To, "/c") && r.Port == "udp/80") })
	applyAndWait(t, l, edited, true)
	probeExactly(t, l, allAllowed)
}

// allowFromYOn is a default-deny in x plus an allow from y on one TCP
// port; metadataLabels (e.g. "labels: {v: \"2\"}") change nothing felix
// renders.
func allowFromYOn(port int, metadataLabels string) []byte {
	return []byte(fmt.Sprintf(`apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-deny, namespace: x}
spec: {podSelector: {}, policyTypes: [Ingress]}
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: allow-from-y-port, namespace: x, %s}
spec:
  podSelector: {}
  policyTypes: [Ingress]
  ingress:
  - from: [{namespaceSelector: {matchLabels: {ns: "y"}}}]
    ports: [{protocol: TCP, port: %d}]
`, metadataLabels, port))
}

func allowFromYOnVerdict(port int) verdict {
	return func(r ProbeResult) bool {
		return namespaceOf(r.To) != "x" || namespaceOf(r.From) == "y" && r.Port == fmt.Sprintf("tcp/%d", port)
	}
}

// editStory edits a policy that exists (its chains stay, their rules
// change): the first probe after apply returns shows the edited table.
// An edit felix renders the same (a label of the policy) returns too.
func editStory(t *testing.T, l *Lab) {
	t.Helper()
	applyAndWait(t, l, allowFromYOn(80, "labels: {v: \"1\"}"), false)
	probeExactly(t, l, allowFromYOnVerdict(80))
	applyAndWait(t, l, allowFromYOn(81, "labels: {v: \"1\"}"), false)
	probeExactly(t, l, allowFromYOnVerdict(81))
	refs, err := l.Apply(context.Background(), allowFromYOn(81, "labels: {v: \"2\"}"), false)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WaitProgrammed(context.Background(), refs, 10*time.Second); err != nil {
		t.Fatalf("an edit felix renders the same: %v", err)
	}
	probeExactly(t, l, allowFromYOnVerdict(81))
	applyAndWait(t, l, allowFromYOn(81, "labels: {v: \"2\"}"), true)
	probeExactly(t, l, allAllowed)
}

// policyStory is the lab's main story on any lab with the default
// namespaces: all allowed, the sample policy applied (the table as
// expected on the very first probe after apply returns), deleted again,
// a Calico policy through calicoctl likewise, then down with nothing
// left.
func policyStory(t *testing.T, l *Lab, start time.Time) {
	t.Helper()
	rounds, n := probeUntil(t, l, allAllowed, 30*time.Second)
	t.Logf("up to full matrix (all %d probes allowed): %s (%d probe rounds)", n, time.Since(start).Round(10*time.Millisecond), rounds)
	sample := readExample(t, "deny-x-allow-from-y.yaml")
	applyAndWait(t, l, sample, false)
	t0 := time.Now()
	res := probeExactly(t, l, sampleVerdict)
	t.Logf("%d probes in %s:\n%s", len(res), time.Since(t0).Round(time.Millisecond), Matrix(res))
	applyAndWait(t, l, sample, true)
	probeExactly(t, l, allAllowed)
	editStory(t, l)
	calicoStory(t, l)
	downAndCheck(t, l)
}
