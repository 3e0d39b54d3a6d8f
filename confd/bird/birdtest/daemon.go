package birdtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/tabbynet/tabby/confd/bird"
)

// Daemon is a real BIRD running in a network namespace for a test. Its
// files (config, control socket, log) live in a temp dir.
type Daemon struct {
	Dir        string
	ConfigPath string
	Ctl        bird.Exec
	cmd        *exec.Cmd
}

// StartBIRD writes conf to a temp dir and runs `bird -f` inside netns n
// (through nsenter), stopped in t.Cleanup. It returns once the control
// socket answers.
func StartBIRD(t testing.TB, n ns.NetNS, conf string) *Daemon {
	t.Helper()
	dir := t.TempDir()
	d := &Daemon{Dir: dir, ConfigPath: filepath.Join(dir, "bird.conf")}
	d.Ctl = bird.Exec{Socket: filepath.Join(dir, "bird.ctl")}
	if err := os.WriteFile(d.ConfigPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := d.Ctl.Validate(context.Background(), d.ConfigPath); err != nil {
		t.Fatalf("initial config: %v", err)
	}
	d.cmd = exec.Command("nsenter", "--net="+n.Path(), "bird", "-f",
		"-c", d.ConfigPath, "-s", d.Ctl.Socket, "-P", filepath.Join(dir, "bird.pid"))
	log, err := os.Create(filepath.Join(dir, "bird.out"))
	if err != nil {
		t.Fatal(err)
	}
	d.cmd.Stdout, d.cmd.Stderr = log, log
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("starting bird: %v", err)
	}
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		_ = d.cmd.Wait()
		_ = log.Close()
	})
	deadline := time.Now().Add(5 * time.Second)
	for {
		if _, err := d.Protocols(); err == nil {
			return d
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(filepath.Join(dir, "bird.out"))
			t.Fatalf("bird did not answer on %s within 5s; output:\n%s", d.Ctl.Socket, out)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Protocols returns `birdc show protocols`, by protocol name.
func (d *Daemon) Protocols() (map[string]bird.Protocol, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	out, err := d.Ctl.Command(ctx, "show", "protocols")
	if err != nil {
		return nil, fmt.Errorf("birdc show protocols: %w: %s", err, out)
	}
	if !strings.Contains(string(out), "Name") {
		return nil, fmt.Errorf("birdc show protocols: unexpected output %q", out)
	}
	return bird.ParseProtocols(string(out)), nil
}

// WaitEstablished waits until every named BGP protocol is Established.
func (d *Daemon) WaitEstablished(t testing.TB, timeout time.Duration, names ...string) map[string]bird.Protocol {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ps, err := d.Protocols()
		if err == nil {
			ok := true
			for _, n := range names {
				if p, found := ps[n]; !found || !strings.HasPrefix(p.Info, "Established") {
					ok = false
				}
			}
			if ok {
				return ps
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: sessions %v not Established within %v: %v (err %v)", d.Dir, names, timeout, ps, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// InNS runs a command inside netns n and returns its combined output.
func InNS(n ns.NetNS, name string, args ...string) (string, error) {
	full := append([]string{"--net=" + n.Path(), name}, args...)
	out, err := exec.Command("nsenter", full...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

// MustInNS is InNS that fails the test.
func MustInNS(t testing.TB, n ns.NetNS, name string, args ...string) string {
	t.Helper()
	out, err := InNS(n, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
