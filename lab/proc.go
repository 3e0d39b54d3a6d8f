package lab

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// markerEnv is set in the environment of every process a lab starts, to
// its prefix: `down` finds them by it even when up was killed before
// recording them.
const markerEnv = "TABBY_LAB_ID"

// spawn starts a long-running process of the lab, detached (its own
// session: it outlives `tabby-lab up`), logging to <dir>/logs/<name>.log,
// inside network namespace netns when not "". It returns at once.
func (l *Lab) spawn(name, netns string, env []string, argv ...string) (*os.Process, error) {
	return l.spawnWD(l.Dir, name, netns, env, argv...)
}

// spawnWD is spawn with working folder wd.
func (l *Lab) spawnWD(wd, name, netns string, env []string, argv ...string) (*os.Process, error) {
	logs := filepath.Join(l.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if netns != "" {
		argv = append([]string{"nsenter", "--net=" + netnsPath(netns), "--"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), env...), markerEnv+"="+l.State.Prefix)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = wd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	// Reap it if it dies while up still runs; after up it is init's.
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

// logTail is the end of a process's log, for error messages.
func (l *Lab) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(l.Dir, "logs", name+".log"))
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// markedProcesses lists the processes whose environment carries the lab's
// marker.
func markedProcesses(prefix string) []int {
	want := []byte(markerEnv + "=" + prefix + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if bytes.Contains(append(env, 0), want) {
			out = append(out, pid)
		}
	}
	return out
}

// killAll sends SIGTERM to pids, waits up to grace for them to exit, then
// SIGKILLs the rest and waits for them to go.
func killAll(pids []int, grace time.Duration) error {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	deadline := time.Now().Add(grace)
	for {
		alive := pids[:0:0]
		for _, p := range pids {
			if processAlive(p) {
				alive = append(alive, p)
			}
		}
		pids = alive
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline = time.Now().Add(5 * time.Second)
	for _, p := range pids {
		for processAlive(p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d survives SIGKILL", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// processAlive is false once the process is gone or a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command's closing parenthesis.
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
