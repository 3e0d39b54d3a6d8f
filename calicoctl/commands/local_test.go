package commands

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/datastore/dsconfig"
)

// localProcs are the processes node status sees in runLocal.
var localProcs = [][]string{{"/usr/bin/calico-node"}, {"bird", "-R", "-s", "/var/run/calico/bird.ctl"}}

// runLocal runs calicoctl with no datastore configured and a fake birdc
// that answers with birdOut (or fails with birdErr).
func runLocal(t *testing.T, stdin, birdOut string, birdErr error, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	a := &app{
		stdin: strings.NewReader(stdin), stdout: &out, stderr: &errOut,
		getenv:        func(string) string { return "" },
		newClient:     dsconfig.Backends{}.New,
		defaultConfig: "/nonexistent/calicoctl.cfg",
		procs:         func() [][]string { return localProcs },
		birdc: func(_ context.Context, socket string, args ...string) ([]byte, error) {
			if want := "show protocols"; strings.Join(args, " ") != want {
				return nil, fmt.Errorf("birdc %v, want %q", args, want)
			}
			return []byte(birdOut), birdErr
		},
	}
	code := run(a, args)
	return fmt.Sprintf("$ calicoctl %s\nexit %d\n%s%s", strings.Join(args, " "), code, out.String(), errOut.String()), code
}

func TestConvertGolden(t *testing.T) {
	td := "testdata/convert/"
	steps := []struct {
		args     string
		stdin    string
		wantCode int
	}{
		{args: "convert -f " + td + "k8s-policies.yaml"},
		{args: "convert -f " + td + "one.yaml -o json"},
		{args: "convert -f -", stdin: mustReadFile(t, td+"one.yaml")},
		{args: "convert -f " + td + "calico-kind.yaml", wantCode: 1},
		{args: "convert -f " + td + "typo.yaml", wantCode: 1},
		{args: "convert -f " + td + "one.yaml -f " + td + "typo.yaml", wantCode: 1},
		{args: "convert -f " + td + "missing.yaml", wantCode: 1},
		{args: "convert", wantCode: 1},
		{args: "convert -f " + td + "one.yaml -o wide", wantCode: 1},
	}
	var transcript strings.Builder
	for _, s := range steps {
		out, code := runLocal(t, s.stdin, "", nil, strings.Fields(s.args)...)
		if code != s.wantCode {
			t.Errorf("%s: exit %d, want %d\n%s", s.args, code, s.wantCode, out)
		}
		transcript.WriteString(out + "\n")
	}
	checkGolden(t, "convert", transcript.String())
}

func TestNodeStatusGolden(t *testing.T) {
	protocols := mustReadFile(t, "testdata/nodestatus/protocols.txt")
	var transcript strings.Builder
	for _, s := range []struct {
		birdOut  string
		birdErr  error
		procs    [][]string
		args     string
		wantCode int
	}{
		{birdOut: protocols, args: "node status --bird-socket=/run/test/bird.ctl"},
		{birdOut: "BIRD 2.0.12 ready.\nName       Proto      Table      State  Since         Info\ndevice1    Device     ---        up     2026-11-30 12:00:00.123\n", args: "node status --bird-socket=/run/test/bird.ctl"},
		{birdOut: "Unable to connect to server control socket (/run/test/bird.ctl): No such file or directory\n", birdErr: errors.New("exit status 1"), args: "node status --bird-socket=/run/test/bird.ctl", wantCode: 1},
		{args: "node status extra", wantCode: 1},
		// As Calico's: no agent process -> not running; no BIRD process ->
		// the BGP backend is not running.
		{procs: [][]string{{"bird"}, {"sshd"}}, args: "node status", wantCode: 1},
		{procs: [][]string{{"/usr/bin/calico-node"}}, args: "node status"},
	} {
		if s.procs != nil {
			localProcs, s.procs = s.procs, localProcs
		}
		out, code := runLocal(t, "", s.birdOut, s.birdErr, strings.Fields(s.args)...)
		if s.procs != nil {
			localProcs = s.procs
		}
		if code != s.wantCode {
			t.Errorf("%s: exit %d, want %d\n%s", s.args, code, s.wantCode, out)
		}
		transcript.WriteString(out + "\n")
	}
	checkGolden(t, "node-status", transcript.String())
}

func TestPeerAddr(t *testing.T) {
	for sym, want := range map[string]string{
		"10_0_0_2":           "10.0.0.2",
		"fd00__2":            "fd00::2",
		"fd00_1_2_3_4_5_6_7": "fd00:1:2:3:4:5:6:7",
		"2001_db8__a_b":      "2001:db8::a:b",
		"1_2_3":              "",
		"nonsense":           "",
	} {
		got, ok := peerAddr(sym)
		if (want == "") == ok || (ok && got.String() != want) {
			t.Errorf("peerAddr(%q) = %v, %v; want %q", sym, got, ok, want)
		}
	}
}

func TestCompletion(t *testing.T) {
	for _, shell := range []string{"bash", "zsh", "fish", "powershell"} {
		out, code := runLocal(t, "", "", nil, "completion", shell)
		if code != 0 || !strings.Contains(out, "calicoctl") || len(out) < 1000 {
			t.Fatalf("completion %s: exit %d, %d bytes:\n%.400s", shell, code, len(out), out)
		}
	}
	out, _ := runLocal(t, "", "", nil, "completion", "bash")
	for _, want := range []string{"__start_calicoctl", "complete -o default -F __start_calicoctl calicoctl"} {
		if !strings.Contains(out, want) {
			t.Errorf("bash completion lacks %q", want)
		}
	}
	// Cobra's dynamic completion: the script calls back into calicoctl.
	out, code := runLocal(t, "", "", nil, "__complete", "ipam", "")
	for _, want := range []string{"show", "check", "release", "configure"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("__complete ipam: exit %d, lacks %q:\n%s", code, want, out)
		}
	}
	if out, code := runLocal(t, "", "", nil, "completion", "tcsh"); code == 0 {
		t.Errorf("completion tcsh: exit 0, want an error:\n%s", out)
	}
}

// TestHelpHasExamples checks every command a user can run shows examples.
func TestHelpHasExamples(t *testing.T) {
	root := newRoot(&app{})
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		check := append([]*cobra.Command{c}, c.Commands()...)
		for _, cc := range check {
			if cc.Runnable() && cc.Example == "" && cc.Name() != "help" && cc.Parent().Name() != "completion" && cc.Name() != "completion" {
				t.Errorf("%s has no --help example", cc.CommandPath())
			}
		}
	}
}

func mustReadFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
