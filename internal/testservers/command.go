package testservers

import (
	"path/filepath"
	"syscall"
	"testing"
)

// Command is a long-running program of the test's own (a Typha, say),
// started like the servers here: its own process group, killed with the
// test process, stopped at cleanup, its output in a log file.
type Command struct{ proc *process }

// StartCommand starts args[0] with args[1:] and env (nil: inherit).
func StartCommand(t testing.TB, name string, args, env []string) *Command {
	t.Helper()
	c := &Command{proc: &process{t: t, name: name, args: args, env: env, log: filepath.Join(t.TempDir(), name+".log")}}
	t.Cleanup(c.proc.stop)
	c.proc.start()
	return c
}

// Pid is the process id (0 when stopped or killed).
func (c *Command) Pid() int {
	if c.proc.cmd == nil {
		return 0
	}
	return c.proc.cmd.Process.Pid
}

// Kill sends SIGKILL and waits for the process to end.
func (c *Command) Kill() {
	if c.proc.cmd == nil {
		return
	}
	_ = syscall.Kill(-c.proc.cmd.Process.Pid, syscall.SIGKILL)
	_ = c.proc.cmd.Wait()
	c.proc.cmd = nil
}

// Running reports whether it is still alive.
func (c *Command) Running() bool { return c.proc.running() }

// Log is the end of its output, for failure messages.
func (c *Command) Log() string { return c.proc.tail() }
