package birdsup

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/confd/bird"
	"github.com/tabbynet/tabby/node/birdctl"
)

// Config says how to run BIRD.
type Config struct {
	// Bird is the bird binary ("bird" from PATH when empty).
	Bird string
	// ConfigPath is the configuration file confd writes; Socket BIRD's
	// control socket; PidFile where BIRD writes its pid (-P).
	ConfigPath, Socket, PidFile string
	// Stderr receives BIRD's output (its log: confd renders `log stderr`).
	Stderr io.Writer
	Logger *slog.Logger
	// MinBackoff / MaxBackoff bound the wait before a restart (default
	// 500ms / 10s; doubled on each exit within a minute of its start).
	MinBackoff, MaxBackoff time.Duration
	// StopTimeout bounds a graceful stop before BIRD is killed (10s).
	StopTimeout time.Duration
	// HangTimeout: a BIRD that has not answered on its socket for this
	// long (checked every HeartbeatInterval) is hung and is killed and
	// restarted (default 30s).
	HangTimeout time.Duration
	// Heartbeat, when set, is called on every turn of the supervision
	// loop (at least every HeartbeatInterval, default 5s).
	Heartbeat         func()
	HeartbeatInterval time.Duration
}

// Supervisor runs BIRD. Validate and Configure may be called from any
// goroutine; Run owns the process.
type Supervisor struct {
	cfg  Config
	log  *slog.Logger
	exec bird.Exec

	startReq chan struct{}

	mu      sync.Mutex
	pid     int           // 0 when not running
	up      chan struct{} // closed when the current BIRD answers on its socket
	starts  int
	lastErr error
}

// New returns a Supervisor; nothing runs until Run.
func New(cfg Config) *Supervisor {
	if cfg.Bird == "" {
		cfg.Bird = "bird"
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = 500 * time.Millisecond
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = 10 * time.Second
	}
	if cfg.StopTimeout == 0 {
		cfg.StopTimeout = 10 * time.Second
	}
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	if cfg.HangTimeout == 0 {
		cfg.HangTimeout = 30 * time.Second
	}
	if cfg.Stderr == nil {
		cfg.Stderr = os.Stderr
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Supervisor{cfg: cfg, log: cfg.Logger.With("component", "bird"), startReq: make(chan struct{}, 1),
		exec: bird.Exec{Bird: cfg.Bird, Socket: cfg.Socket}, up: make(chan struct{})}
}

// Validate implements bird.Control (`bird -p -c path`).
func (s *Supervisor) Validate(ctx context.Context, path string) error {
	return s.exec.Validate(ctx, path)
}

// Configure implements bird.Control: it starts BIRD if it is not running
// (on the file now in place) and waits until it answers; otherwise it
// makes BIRD re-read its configuration.
func (s *Supervisor) Configure(ctx context.Context) error {
	s.mu.Lock()
	up := s.up
	running := s.pid != 0
	s.mu.Unlock()
	select {
	case <-up:
		return s.configure(ctx)
	default:
	}
	if !running {
		select {
		case s.startReq <- struct{}{}:
		default:
		}
	}
	select {
	case <-up:
		// BIRD read the file at start; configure again in case it was
		// already starting on an older one.
		return s.configure(ctx)
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(30 * time.Second):
		s.mu.Lock()
		err := s.lastErr
		s.mu.Unlock()
		return fmt.Errorf("BIRD did not start within 30s: %v", err)
	}
}

func (s *Supervisor) configure(ctx context.Context) error {
	lines, err := birdctl.Command(ctx, s.cfg.Socket, "configure")
	if err != nil {
		var msg []string
		for _, l := range lines {
			msg = append(msg, l.Text)
		}
		if errors.Is(err, birdctl.ErrBIRD) {
			return &bird.ConfigError{Stage: "configure", Message: strings.Join(msg, "; ")}
		}
		return err
	}
	return nil
}

// Running says whether BIRD runs and answers, and how often it was
// started.
func (s *Supervisor) Running() (bool, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	select {
	case <-s.up:
		return s.pid != 0, s.starts
	default:
		return false, s.starts
	}
}

// Pid is the running BIRD's pid (0 when none).
func (s *Supervisor) Pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.pid
}

// Run waits for the first Configure, then keeps BIRD running until ctx
// ends; it then stops BIRD gracefully (routes kept) and returns.
func (s *Supervisor) Run(ctx context.Context) error {
	beat := time.NewTicker(s.cfg.HeartbeatInterval)
	defer beat.Stop()
	s.killStale()
	for {
		s.heartbeat()
		select {
		case <-ctx.Done():
			return nil
		case <-beat.C:
			continue
		case <-s.startReq:
		}
		break
	}
	backoff := s.cfg.MinBackoff
	for {
		started := time.Now()
		err := s.runOnce(ctx, beat.C)
		if ctx.Err() != nil {
			return nil
		}
		s.log.Error("BIRD exited; restarting it", "error", err, "after", backoff)
		if time.Since(started) > time.Minute {
			backoff = s.cfg.MinBackoff
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, s.cfg.MaxBackoff)
	}
}

func (s *Supervisor) heartbeat() {
	if s.cfg.Heartbeat != nil {
		s.cfg.Heartbeat()
	}
}

// runOnce starts BIRD, waits for its socket, and returns when it exits
// (or, after ctx ended, once it was stopped).
func (s *Supervisor) runOnce(ctx context.Context, beat <-chan time.Time) error {
	exited := make(chan error, 1)
	started := make(chan error, 1)
	go func() {
		// BIRD gets SIGKILL when the thread that forked it ends: keep this
		// goroutine on its thread for BIRD's lifetime.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		cmd := exec.Command(s.cfg.Bird, "-f", "-R", "-c", s.cfg.ConfigPath, "-s", s.cfg.Socket, "-P", s.cfg.PidFile)
		cmd.Stdout, cmd.Stderr = s.cfg.Stderr, s.cfg.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		s.mu.Lock()
		s.pid = cmd.Process.Pid
		s.starts++
		s.mu.Unlock()
		started <- nil
		err := cmd.Wait()
		s.mu.Lock()
		s.pid, s.lastErr = 0, fmt.Errorf("BIRD exited: %v", err)
		s.up = make(chan struct{})
		s.mu.Unlock()
		exited <- err
	}()
	if err := <-started; err != nil {
		s.mu.Lock()
		s.lastErr = err
		s.mu.Unlock()
		return fmt.Errorf("starting BIRD: %w", err)
	}
	s.log.Info("BIRD started", "pid", s.Pid(), "config", s.cfg.ConfigPath, "socket", s.cfg.Socket)
	go s.markUp(ctx, exited)
	lastAnswer := time.Now()
	for {
		select {
		case err := <-exited:
			return err
		case <-beat:
			s.heartbeat()
			qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, err := birdctl.Command(qctx, s.cfg.Socket, "show status")
			cancel()
			if err == nil {
				lastAnswer = time.Now()
			} else if time.Since(lastAnswer) > s.cfg.HangTimeout && ctx.Err() == nil {
				pid := s.Pid()
				s.log.Error("BIRD does not answer on its socket; killing it to restart it", "pid", pid,
					"silentFor", time.Since(lastAnswer).Round(time.Second), "error", err)
				kill(pid)
				lastAnswer = time.Now()
			}
		case <-ctx.Done():
			s.stop(exited)
			return nil
		}
	}
}

// markUp closes the current up channel once BIRD answers on its socket.
func (s *Supervisor) markUp(ctx context.Context, exited <-chan error) {
	for {
		s.mu.Lock()
		pid, up := s.pid, s.up
		s.mu.Unlock()
		if pid == 0 {
			return
		}
		qctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := birdctl.Command(qctx, s.cfg.Socket, "show status")
		cancel()
		if err == nil {
			s.mu.Lock()
			if s.up == up && s.pid == pid {
				close(up)
			}
			s.mu.Unlock()
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop asks BIRD for a graceful restart shutdown (peers keep its routes,
// the kernel keeps its own) and kills it if it does not exit in time.
func (s *Supervisor) stop(exited <-chan error) {
	pid := s.Pid()
	qctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := birdctl.Command(qctx, s.cfg.Socket, "graceful restart")
	cancel()
	if err != nil {
		s.log.Warn("BIRD refused a graceful restart; killing it (peers keep its routes as for a crash)", "error", err)
		kill(pid)
	}
	select {
	case <-exited:
		s.log.Info("BIRD stopped for graceful restart")
	case <-time.After(s.cfg.StopTimeout):
		s.log.Warn("BIRD did not stop in time; killing it", "pid", pid)
		kill(pid)
		<-exited
	}
}

// killStale kills a BIRD a previous calico-node left running (the pid in
// the pid file, if it is a bird process).
func (s *Supervisor) killStale() {
	data, err := os.ReadFile(s.cfg.PidFile)
	if err != nil {
		return
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || pid <= 1 {
		return
	}
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil || strings.TrimSpace(string(comm)) != "bird" {
		return
	}
	s.log.Warn("killing the BIRD a previous calico-node left", "pid", pid)
	kill(pid)
	for i := 0; i < 100; i++ {
		if _, err := os.Stat(fmt.Sprintf("/proc/%d", pid)); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill sends SIGKILL to one process; never to 0 or a negative pid (a
// process group).
func kill(pid int) {
	if pid > 1 {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
