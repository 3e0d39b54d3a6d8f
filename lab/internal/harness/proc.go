package harness

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

// Procs starts the long-running processes of one harness instance: each
// detached (its own session: it outlives the command that started it),
// logging to <Dir>/logs/<name>.log, with Marker=ID in its environment.
type Procs struct {
	Dir    string // the state folder
	Marker string // the environment variable naming the harness (TABBY_LAB_ID, TABBY_CLUSTER_ID)
	ID     string // its value: the instance's prefix
}

// Spawn starts argv in working folder wd with env added to this process's
// environment and returns at once.
func (p Procs) Spawn(wd, name string, env []string, argv ...string) (*os.Process, error) {
	logs := filepath.Join(p.Dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(logs, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(append(os.Environ(), env...), p.Marker+"="+p.ID)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = wd
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	// Reap it if it dies while the harness still runs; after, it is init's.
	go func() { _ = cmd.Wait() }()
	return cmd.Process, nil
}

// LogTail is the last n bytes of a process's log, for error messages.
func (p Procs) LogTail(name string, n int) string {
	b, _ := os.ReadFile(filepath.Join(p.Dir, "logs", name+".log"))
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// Marked lists the processes (but this one) whose environment carries
// marker=id.
func Marked(marker, id string) []int {
	want := []byte(marker + "=" + id + "\x00")
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

// KillAll sends SIGTERM to pids, waits up to grace for them to exit, then
// SIGKILLs the rest and waits (up to 10 s) for them to go.
func KillAll(pids []int, grace time.Duration) error {
	for _, p := range pids {
		_ = syscall.Kill(p, syscall.SIGTERM)
	}
	for deadline := time.Now().Add(grace); ; time.Sleep(20 * time.Millisecond) {
		alive := pids[:0:0]
		for _, p := range pids {
			if Alive(p) {
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
		for Alive(p) {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d survives SIGKILL", p)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return nil
}

// Alive is false once the process is gone or a zombie.
func Alive(pid int) bool {
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
