package testservers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// process is one server process that can be stopped and started again
// with the same arguments.
type process struct {
	t    testing.TB
	name string
	args []string
	dir  string   // working folder ("" = inherit)
	env  []string // environment ("" = inherit)
	log  string
	cmd  *exec.Cmd
}

func (p *process) start() {
	p.t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		p.t.Fatalf("opening %s: %v", p.log, err)
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Dir = p.dir
	cmd.Env = p.env
	// Own process group, and die with the test process.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := spawn(cmd); err != nil {
		logf.Close()
		p.t.Fatalf("starting %s: %v", p.name, err)
	}
	logf.Close()
	p.cmd = cmd
}

func (p *process) stop() {
	if p.cmd == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-done
	}
	p.cmd = nil
}

// running reports whether the process is still alive.
func (p *process) running() bool {
	return p.cmd != nil && p.cmd.ProcessState == nil && p.cmd.Process.Signal(syscall.Signal(0)) == nil && !zombie(p.cmd.Process.Pid)
}

// zombie: pid has exited and waits to be reaped (signal 0 still reaches
// it).
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	i := bytes.LastIndexByte(b, ')')
	return i >= 0 && i+2 < len(b) && b[i+2] == 'Z'
}

// tail returns the end of the log, for failure messages.
func (p *process) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return fmt.Sprintf("--- %s log (%s) ---\n%s", p.name, p.log, b)
}

// Pdeathsig fires when the OS thread that forked the child exits, not the
// process; Go retires threads (e.g. after a namespace switch with the thread
// locked), which would kill servers at random. So every server is forked
// from one thread that lives as long as the test binary.
var spawnReqs = make(chan spawnReq)

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

func init() {
	go func() {
		runtime.LockOSThread() // never unlocked: this thread outlives every child
		for r := range spawnReqs {
			r.done <- r.cmd.Start()
		}
	}()
}

func spawn(cmd *exec.Cmd) error {
	done := make(chan error)
	spawnReqs <- spawnReq{cmd: cmd, done: done}
	return <-done
}

// signal sends sig to the running process.
func (p *process) signal(sig syscall.Signal) {
	p.t.Helper()
	if p.cmd == nil || p.cmd.Process == nil {
		p.t.Fatalf("%s is not running", p.name)
	}
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatalf("signalling %s: %v", p.name, err)
	}
}
