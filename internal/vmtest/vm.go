package vmtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// VMConfig describes one VM.
type VMConfig struct {
	Image   Image
	ID      int      // tabby.id= on the kernel command line: names the share's outputs
	Segment *Segment // the qemu process runs inside its namespace
	Tap     string   // the segment's tap for the NIC
	MAC     string
	// Share is the folder mounted at /mnt/share in the guest (9p): its
	// run.sh is the guest's whole life (see hack/build-vm-image.sh's init).
	Share  string
	MemMiB int // [default 1024]
	CPUs   int // [default 2]
}

// VM is one running qemu.
type VM struct {
	cfg     VMConfig
	Console string // the serial console's log
	cmd     *exec.Cmd
	done    chan struct{}
	err     error
}

// Qemu is the emulator binary.
const Qemu = "qemu-system-x86_64"

// qemuArgs is the command line: software emulation on every vCPU
// (-accel tcg,thread=multi -cpu max: /dev/kvm here runs only PVM guests),
// no_timer_check (without it concurrent VMs can panic on "IO-APIC + timer
// doesn't work"), tsc=reliable (TCG's guest TSC is the host's, which is
// synchronized, yet the guest's boot check marks it unstable and falls
// back to the HPET, which has no vDSO: every clock read of a Go program
// became a system call and MMIO; measured in lab/cluster/STATUS.md "SCTP on
// VM nodes"), the image shared read-only (snapshot=on).
func (c VMConfig) qemuArgs(console string) []string {
	return []string{
		"-accel", "tcg,thread=multi", "-cpu", "max",
		"-m", strconv.Itoa(c.MemMiB), "-smp", strconv.Itoa(c.CPUs),
		"-display", "none", "-monitor", "none", "-no-reboot", "-nodefaults",
		"-serial", "file:" + console,
		"-kernel", c.Image.Kernel, "-initrd", c.Image.Initrd,
		"-append", fmt.Sprintf("root=/dev/vda rw console=ttyS0 quiet panic=-1 no_timer_check tsc=reliable init=/sbin/tabbyinit tabby.id=%d", c.ID),
		"-drive", "file=" + c.Image.Root + ",if=virtio,format=raw,snapshot=on",
		"-virtfs", "local,path=" + c.Share + ",mount_tag=share,security_model=none",
		"-netdev", "tap,id=n0,ifname=" + c.Tap + ",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac=" + c.MAC,
	}
}

// Command is the VM's qemu command line, run inside the segment's
// namespace by nsenter (for callers that supervise it themselves, as the
// lab does); the serial console goes to <share>/console-<id>.log.
func (c VMConfig) Command() ([]string, error) {
	if c.MemMiB == 0 {
		c.MemMiB = 1024
	}
	if c.CPUs == 0 {
		c.CPUs = 2
	}
	qemu, err := exec.LookPath(Qemu)
	if err != nil {
		return nil, fmt.Errorf("qemu is not installed (apt-get install qemu-system-x86): %w", err)
	}
	console := filepath.Join(c.Share, fmt.Sprintf("console-%d.log", c.ID))
	return append([]string{"nsenter", "--net=" + filepath.Join("/run/netns", c.Segment.Netns), "--", qemu}, c.qemuArgs(console)...), nil
}

// Boot starts the VM's qemu inside the segment's namespace. It dies with
// the process that booted it (parent-death signal) and by Kill.
func Boot(c VMConfig) (*VM, error) {
	argv, err := c.Command()
	if err != nil {
		return nil, err
	}
	v := &VM{cfg: c, Console: filepath.Join(c.Share, fmt.Sprintf("console-%d.log", c.ID)), done: make(chan struct{})}
	v.cmd = exec.Command(argv[0], argv[1:]...)
	stderr, err := os.Create(filepath.Join(c.Share, fmt.Sprintf("qemu-%d.log", c.ID)))
	if err != nil {
		return nil, err
	}
	v.cmd.Stdout, v.cmd.Stderr = stderr, stderr
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := spawn(v.cmd); err != nil {
		stderr.Close()
		return nil, fmt.Errorf("starting qemu for VM %d: %w", c.ID, err)
	}
	go func() {
		v.err = v.cmd.Wait()
		stderr.Close()
		close(v.done)
	}()
	return v, nil
}

// Done is closed when qemu has exited.
func (v *VM) Done() <-chan struct{} { return v.done }

// Wait waits for qemu to exit (the guest powered off) or ctx to end.
func (v *VM) Wait(ctx context.Context) error {
	select {
	case <-v.done:
		return v.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Kill stops qemu (SIGKILL) and waits for it; a VM already gone is fine.
func (v *VM) Kill() {
	select {
	case <-v.done:
		return
	default:
	}
	_ = v.cmd.Process.Kill()
	<-v.done
}

// ExitCode is the guest's run.sh exit code, written to the share.
func (v *VM) ExitCode() (int, error) {
	b, err := os.ReadFile(filepath.Join(v.cfg.Share, fmt.Sprintf("exit-%d", v.cfg.ID)))
	if err != nil {
		return -1, fmt.Errorf("VM %d wrote no exit code: %w", v.cfg.ID, err)
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// QemuLog is what qemu itself printed (not the guest's console).
func (v *VM) QemuLog() string {
	b, _ := os.ReadFile(filepath.Join(v.cfg.Share, fmt.Sprintf("qemu-%d.log", v.cfg.ID)))
	return string(b)
}

// Tail returns the last n bytes of the file at path.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// spawn starts cmd from one long-lived OS thread: the parent-death signal
// fires when the thread that forked exits, and Go may end other threads
// (e.g. one left in another namespace).
func spawn(cmd *exec.Cmd) error {
	spawnOnce.Do(func() {
		spawnReqs = make(chan spawnReq)
		go func() {
			runtime.LockOSThread()
			for r := range spawnReqs {
				r.done <- r.cmd.Start()
			}
		}()
	})
	r := spawnReq{cmd: cmd, done: make(chan error)}
	spawnReqs <- r
	return <-r.done
}

type spawnReq struct {
	cmd  *exec.Cmd
	done chan error
}

var (
	spawnOnce sync.Once
	spawnReqs chan spawnReq
)

func writeSysctl(key, value string) error {
	if err := os.WriteFile(filepath.Join("/proc/sys", key), []byte(value), 0o644); err != nil {
		return fmt.Errorf("sysctl %s=%s: %w", key, value, err)
	}
	return nil
}

// errQemuExited reports a VM that stopped before its agent answered.
var errQemuExited = errors.New("qemu exited")

// waitFor polls ok every interval until it returns true, ctx ends, or the
// VM exits.
func (v *VM) waitFor(ctx context.Context, interval time.Duration, ok func() bool) error {
	t := time.NewTicker(interval)
	defer t.Stop()
	for !ok() {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-v.done:
			return fmt.Errorf("VM %d: %w (%v)", v.cfg.ID, errQemuExited, v.err)
		case <-t.C:
		}
	}
	return nil
}
