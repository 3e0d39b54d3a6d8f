package cluster

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// markerEnv is set, to the cluster's prefix, in the environment of every
// process the cluster starts: Down finds them by it even when Up was
// killed before recording them.
const markerEnv = "TABBY_CLUSTER_ID"

// spawn starts a long-running process of the cluster, detached (its own
// session: it outlives Up), logging to <state>/logs/<name>.log. It returns
// at once.
func (c *Cluster) spawn(name string, argv ...string) (*os.Process, error) {
	logs := filepath.Join(c.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), markerEnv+"="+c.State.Prefix)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = c.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

// logTail is the end of a process's log, for error messages.
func (c *Cluster) logTail(name string) string {
	b, _ := os.ReadFile(filepath.Join(c.Dir, "logs", name+".log"))
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// run runs a short command and returns its output, or an error with it.
func run(argv ...string) (string, error) {
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(argv, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// markedProcesses lists the processes whose environment carries marker
// prefix.
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
		if err == nil && bytes.Contains(append(env, 0), want) {
			out = append(out, pid)
		}
	}
	return out
}

// killAll sends SIGTERM to pids, waits up to grace, then SIGKILLs the
// rest and waits for them to go.
func killAll(pids []int, grace time.Duration) error {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(grace); ; time.Sleep(20 * time.Millisecond) {
		alive := pids[:0:0]
		for _, p := range pids {
			if processAlive(p) {
				alive = append(alive, p)
			}
		}
		if pids = alive; len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			break
		}
	}
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
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
	if i := bytes.LastIndexByte(b, ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}
