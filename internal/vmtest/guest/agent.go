package guest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/containernetworking/cni/libcni"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
)

// Agent is one VM's agent. Its methods are safe for concurrent use (the
// HTTP server calls them from several goroutines).
type Agent struct {
	Share string // the 9p share (/mnt/share)
	Bin   string // local copy of the share's binaries
	Me    Node
	cfg   Config
	log   *slog.Logger
	cni   *libcni.CNIConfig
	list  *libcni.NetworkConfigList

	mu    sync.Mutex
	pods  map[string]*pod
	procs []*exec.Cmd
	quit  chan struct{}
}

type pod struct {
	ns      ns.NetNS
	rt      *libcni.RuntimeConf
	closers []func()
}

// New reads the share's config and finds this VM's node by id.
func New(share string, id int, log *slog.Logger) (*Agent, error) {
	b, err := os.ReadFile(filepath.Join(share, "config.json"))
	if err != nil {
		return nil, err
	}
	a := &Agent{Share: share, Bin: "/opt/tabby/bin", log: log, pods: map[string]*pod{}, quit: make(chan struct{})}
	if err := json.Unmarshal(b, &a.cfg); err != nil {
		return nil, fmt.Errorf("reading config.json: %w", err)
	}
	for _, n := range a.cfg.Nodes {
		if n.ID == id {
			a.Me = n
		}
	}
	if a.Me.Name == "" {
		return nil, fmt.Errorf("config.json has no node with id %d", id)
	}
	if a.list, err = libcni.ConfListFromBytes(a.cfg.CNI); err != nil {
		return nil, fmt.Errorf("the CNI config: %w", err)
	}
	a.cni = libcni.NewCNIConfigWithCacheDir([]string{a.Bin}, "/var/lib/cni", nil)
	return a, nil
}

// Run sets the node up (binaries copied in, NIC addressed) and serves the
// harness until a /quit call or ctx ends; it then stops what it spawned.
func (a *Agent) Run(ctx context.Context) error {
	if err := copyDir(filepath.Join(a.Share, "bin"), a.Bin); err != nil {
		return err
	}
	// Commands are looked up in this process's PATH: the binaries first.
	if err := os.Setenv("PATH", a.Bin+":/usr/sbin:/usr/bin:/sbin:/bin"); err != nil {
		return err
	}
	if err := a.underlay(); err != nil {
		return err
	}
	addr := netip.MustParsePrefix(a.Me.Addr).Addr()
	ln, err := net.Listen("tcp", netip.AddrPortFrom(addr, ControlPort).String())
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.routes()}
	go func() { _ = srv.Serve(ln) }()
	a.log.Info("agent ready", "node", a.Me.Name, "addr", a.Me.Addr)
	select {
	case <-ctx.Done():
	case <-a.quit:
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	a.stopAll()
	return nil
}

// underlay gives the NIC with the node's MAC its address and a default
// route via the segment's router.
func (a *Agent) underlay() error {
	links, err := netlink.LinkList()
	if err != nil {
		return err
	}
	var nic netlink.Link
	for _, l := range links {
		if strings.EqualFold(l.Attrs().HardwareAddr.String(), a.Me.MAC) {
			nic = l
		}
	}
	if nic == nil {
		return fmt.Errorf("no NIC with MAC %s", a.Me.MAC)
	}
	addr, err := netlink.ParseAddr(a.Me.Addr)
	if err != nil {
		return err
	}
	if err := netlink.AddrAdd(nic, addr); err != nil {
		return fmt.Errorf("addressing %s: %w", nic.Attrs().Name, err)
	}
	if err := netlink.LinkSetUp(nic); err != nil {
		return err
	}
	gw := net.ParseIP(a.Me.Gateway)
	if err := netlink.RouteAdd(&netlink.Route{Gw: gw, LinkIndex: nic.Attrs().Index}); err != nil {
		return fmt.Errorf("default route via %s: %w", gw, err)
	}
	return nil
}

func (a *Agent) routes() *http.ServeMux {
	m := http.NewServeMux()
	m.HandleFunc("POST /exec", handle(a.Exec))
	m.HandleFunc("POST /spawn", handle(func(r SpawnRequest) (struct{}, error) { return struct{}{}, a.Spawn(r) }))
	m.HandleFunc("POST /pod/add", handle(a.AddPod))
	m.HandleFunc("POST /pod/del", handle(func(r PodRequest) (struct{}, error) { return struct{}{}, a.DelPod(r) }))
	m.HandleFunc("POST /probe", handle(a.Probe))
	m.HandleFunc("POST /probes", handle(a.Probes))
	m.HandleFunc("POST /stream", handle(a.Stream))
	m.HandleFunc("POST /quit", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		a.mu.Lock()
		defer a.mu.Unlock()
		select {
		case <-a.quit:
		default:
			close(a.quit)
		}
	})
	return m
}

// handle adapts a typed call to HTTP: JSON in, JSON out, an error as a
// 500 with its text.
func handle[Req, Res any](f func(Req) (Res, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req Req
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		res, err := f(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		_ = json.NewEncoder(w).Encode(res)
	}
}

// Exec runs a command to completion (in a pod's namespace with Pod).
func (a *Agent) Exec(r ExecRequest) (ExecResult, error) {
	if len(r.Argv) == 0 {
		return ExecResult{}, errors.New("exec: no command")
	}
	argv := r.Argv
	if r.Pod != "" {
		argv = append([]string{"ip", "netns", "exec", podNetns(r.Pod)}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = append(a.env(), r.Env...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ExecResult{Output: string(out), Code: ee.ExitCode()}, nil
	case err != nil:
		return ExecResult{}, err
	}
	return ExecResult{Output: string(out)}, nil
}

// env is the agent's environment (PATH with the local binaries first).
func (a *Agent) env() []string { return os.Environ() }

// Spawn starts a long-running process (calico-node), logging to the
// share; it is killed when the agent stops.
func (a *Agent) Spawn(r SpawnRequest) error {
	if len(r.Argv) == 0 || r.Name == "" {
		return errors.New("spawn: a name and a command are needed")
	}
	f, err := os.Create(filepath.Join(a.Share, fmt.Sprintf("%s-%d.log", r.Name, a.Me.ID)))
	if err != nil {
		return err
	}
	cmd := exec.Command(r.Argv[0], r.Argv[1:]...)
	cmd.Env = append(a.env(), r.Env...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		f.Close()
		return err
	}
	a.mu.Lock()
	a.procs = append(a.procs, cmd)
	a.mu.Unlock()
	go func() { _ = cmd.Wait(); f.Close() }()
	return nil
}

func (a *Agent) stopAll() {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, c := range a.procs {
		_ = c.Process.Kill()
	}
	for _, p := range a.pods {
		for _, c := range p.closers {
			c()
		}
	}
}

// copyDir copies every regular file of src into dst (executable): the
// binaries run from the guest's own disk rather than over 9p.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// result4 is the first IPv4 address of a CNI result.
func result4(r *current.Result) (netip.Addr, error) {
	for _, ip := range r.IPs {
		if a, ok := netip.AddrFromSlice(ip.Address.IP.To4()); ok {
			return a, nil
		}
	}
	return netip.Addr{}, errors.New("the CNI result holds no IPv4 address")
}
