package testservers

import (
	"context"
	"net/http"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// Etcd is a running etcd server on loopback.
type Etcd struct {
	proc     *process
	endpoint string
	unix     string
	health   *http.Client // nil: plain http
}

// StartEtcd starts a fresh single-member etcd and stops it at cleanup.
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	dir := t.TempDir()
	client, peer := freePort(t), freePort(t)
	e := &Etcd{endpoint: "http://127.0.0.1:" + itoa(client)}
	// A unix socket too (etcd names it after the URL's host, in its working
	// folder): reachable from every network namespace, so processes inside
	// a test's node namespace can use the same server.
	sock := "localhost:" + itoa(client)
	e.unix = "unix://" + filepath.Join(dir, sock)
	e.proc = &process{t: t, name: "etcd", dir: dir, log: filepath.Join(dir, "etcd.log"), args: []string{
		binary(t, "etcd"),
		"--name", "test",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", e.endpoint + ",unix://" + sock,
		"--advertise-client-urls", e.endpoint,
		"--listen-peer-urls", "http://127.0.0.1:" + itoa(peer),
		"--initial-advertise-peer-urls", "http://127.0.0.1:" + itoa(peer),
		"--initial-cluster", "test=http://127.0.0.1:" + itoa(peer),
		"--unsafe-no-fsync",
		"--log-level", "warn",
	}}
	t.Cleanup(e.proc.stop)
	e.Start()
	return e
}

// Endpoint is the client URL on loopback.
func (e *Etcd) Endpoint() string { return e.endpoint }

// UnixEndpoint is the client URL of the server's unix socket, usable from
// any network namespace.
func (e *Etcd) UnixEndpoint() string { return e.unix }

// Pid is the server process's id (0 while stopped).
func (e *Etcd) Pid() int {
	if e.proc.cmd == nil {
		return 0
	}
	return e.proc.cmd.Process.Pid
}

// Stop stops the server, keeping its data.
func (e *Etcd) Stop() { e.proc.stop() }

// Start (re)starts the server and waits until it serves.
func (e *Etcd) Start() {
	e.proc.t.Helper()
	e.proc.start()
	waitHealthy(e.proc, e.endpoint+"/health", e.health, 30*time.Second)
}

// waitHealthy polls url until it answers 200 or the process dies.
func waitHealthy(p *process, url string, client *http.Client, timeout time.Duration) {
	p.t.Helper()
	if client == nil {
		client = &http.Client{Timeout: time.Second}
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := client.Do(req)
		cancel()
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if !p.running() {
			p.t.Fatalf("%s exited while starting\n%s", p.name, p.tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	p.t.Fatalf("%s not healthy at %s after %s\n%s", p.name, url, timeout, p.tail())
}

// Freeze stops the server's process (SIGSTOP) without closing its
// connections: clients see a datastore that no longer answers. Thaw
// resumes it.
func (e *Etcd) Freeze() { e.proc.signal(syscall.SIGSTOP) }

// Thaw resumes a frozen server (SIGCONT).
func (e *Etcd) Thaw() { e.proc.signal(syscall.SIGCONT) }
