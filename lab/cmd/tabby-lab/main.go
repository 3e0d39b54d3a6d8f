// Command tabby-lab runs a multi-node Tabby cluster on one machine: a real
// datastore, node namespaces with their agents, pods wired by the calico
// CNI plugin and serving TCP and UDP, policy applied and probed. Verbs:
// up, down, status, restart, report, apply, delete, probe, exec, env (and serve,
// the pods' workload). See package lab and README.md. It only parses flags and
// calls package lab.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tabbynet/tabby/lab"
)

const usage = `Usage: tabby-lab [--state DIR] [--bin DIR] <verb> [flags]

Verbs:
  up [--model FILE] [--datastore etcd|kubernetes] [--nodes N] [--vms] [--flows=false]
     [--dataplane iptables|nftables]
                       build the lab (default: the upstream NetworkPolicy
                       e2e model, 3 nodes, etcd, felix's default dataplane:
                       iptables here; the flow aggregator and its page,
                       whose address up prints, unless --flows=false)
  down                 remove everything of the lab (also a half-built one)
  status               nodes, agents' health (not running, paused, not
                       ready and why), BGP sessions, pods, IPs and ports
  restart <node>... [--timeout 60s]
                       stop each node's calico-node if it runs, start it
                       again, wait until they are ready
  report <node>        what the node's felix reports it programmed (JSON):
                       per local endpoint its policies, profiles and chains
                       with their rule hashes, and the resources read
  apply -f FILE        Calico v3 resources and networking.k8s.io/v1
                       NetworkPolicies; returns once every node programmed them
  delete -f FILE       the same, removed
  probe [--ports tcp/80,udp/80,...] [-o text|json|table]
                       every ordered pod pair on each port, in parallel
  exec <ns>/<pod>|<node> -- <command>
                       run a command in a pod's (or node's) network namespace
  env                  exports pointing calicoctl and kubectl at the lab
                       (calicoctl node status: BIRD of $TABBY_LAB_NODE)
  cluster <verb>       a real Kubernetes cluster with Tabby installed by
                       kubectl apply (up, down, status, env; see
                       tabby-lab cluster)

--state defaults to $TABBY_LAB_STATE or /run/tabby-lab; --bin to the folder
of this binary (make build's bin/).
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	var ec exitCode
	if errors.As(err, &ec) {
		os.Exit(int(ec))
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "tabby-lab:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	global := flag.NewFlagSet("tabby-lab", flag.ContinueOnError)
	global.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	stateDir := os.Getenv("TABBY_LAB_STATE")
	if stateDir == "" {
		stateDir = lab.DefaultStateDir
	}
	self, _ := os.Executable()
	global.StringVar(&stateDir, "state", stateDir, "the lab's state folder")
	bin := global.String("bin", filepath.Dir(self), "folder with calico-node, calico, calico-ipam, calico-k8s, calicoctl, tabby-lab")
	if err := global.Parse(args); err != nil {
		return err
	}
	if global.NArg() == 0 {
		global.Usage()
		return flag.ErrHelp
	}
	verb, rest := global.Arg(0), global.Args()[1:]
	fs := flag.NewFlagSet("tabby-lab "+verb, flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage) }
	open := func() (*lab.Lab, error) { return lab.Open(stateDir, *bin, os.Stdout) }
	switch verb {
	case "up":
		model := fs.String("model", "", "model file (YAML); default: the upstream NetworkPolicy e2e model")
		ds := fs.String("datastore", lab.DatastoreEtcd, "etcd or kubernetes")
		nodes := fs.Int("nodes", 0, "number of nodes (overrides the model's)")
		dataplane := fs.String("dataplane", "", "iptables or nftables (felix's nftablesMode Disabled or Enabled); default: felix's (Auto)")
		vms := fs.Bool("vms", false, "each node a qemu VM on Debian's own kernel (ipip, wireguard, dummy); etcd only")
		flows := fs.Bool("flows", true, "start the flow aggregator and its page (goldmane) and send every node's flows to it; not with --vms")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		m := lab.DefaultModel()
		if *model != "" {
			var err error
			if m, err = lab.LoadModel(*model); err != nil {
				return err
			}
		}
		if *nodes > 0 {
			var err error
			if m, err = m.WithNodes(*nodes); err != nil {
				return err
			}
		}
		l, err := lab.Up(ctx, lab.UpOptions{Dir: stateDir, Bin: *bin, Model: m, Datastore: *ds, Dataplane: *dataplane, Out: os.Stdout, VMs: *vms, Flows: *flows && !*vms})
		if err != nil {
			return err
		}
		defer l.Close()
		return nil
	case "down":
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if err := lab.Down(stateDir); err != nil {
			return err
		}
		fmt.Println("lab removed")
		return nil
	case "status":
		if err := fs.Parse(rest); err != nil {
			return err
		}
		l, err := open()
		if err != nil {
			return err
		}
		defer l.Close()
		return l.Status(ctx, os.Stdout)
	case "restart":
		return restart(ctx, fs, rest, open)
	case "report":
		return report(ctx, rest, open)
	case "apply", "delete":
		return apply(ctx, verb, fs, rest, open)
	case "probe":
		portsFlag := fs.String("ports", "", "ports to probe, e.g. tcp/80,udp/81 (default: every port the pods serve)")
		output := fs.String("o", "text", "text (one line per probe), json or table")
		timeout := fs.Duration("timeout", time.Second, "per-probe timeout")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		var ports []lab.Port
		if *portsFlag != "" {
			var err error
			if ports, err = lab.ParsePorts(*portsFlag); err != nil {
				return err
			}
		}
		l, err := open()
		if err != nil {
			return err
		}
		defer l.Close()
		res, err := l.Probe(ctx, ports, *timeout)
		if err != nil {
			return err
		}
		return printProbes(res, *output)
	case "exec":
		if len(rest) < 1 {
			return errors.New("exec <ns>/<pod> -- <command>")
		}
		target, argv := rest[0], rest[1:]
		if len(argv) > 0 && argv[0] == "--" {
			argv = argv[1:]
		}
		l, err := open()
		if err != nil {
			return err
		}
		defer l.Close()
		return l.Exec(target, argv)
	case "env":
		l, err := open()
		if err != nil {
			return err
		}
		defer l.Close()
		fmt.Print(l.Env())
		return nil
	case "cluster":
		return runCluster(ctx, *bin, rest)
	case "proxy":
		listen := fs.String("listen", "127.0.0.1:6443", "address to listen on inside each namespace")
		to := fs.String("to", "", "address to forward to, from this namespace")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		return lab.Proxy(ctx, fs.Args(), *listen, *to)
	case "get":
		// Used inside a VM node: prints the answer of an HTTP GET on the
		// node's own loopback (felix's endpoint report).
		if err := fs.Parse(rest); err != nil {
			return err
		}
		if fs.NArg() != 1 {
			return errors.New("usage: tabby-lab get <url>")
		}
		return lab.Get(ctx, fs.Arg(0), os.Stdout)
	case "serve":
		id := fs.String("id", "", "the pod's id, sent in every answer")
		portsFlag := fs.String("ports", "tcp/80,udp/80,tcp/81,udp/81", "ports to serve")
		if err := fs.Parse(rest); err != nil {
			return err
		}
		ports, err := lab.ParsePorts(*portsFlag)
		if err != nil {
			return err
		}
		return lab.Serve(ctx, *id, ports)
	}
	global.Usage()
	return fmt.Errorf("unknown verb %q", verb)
}

func readInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(os.Stdin)
	}
	return os.ReadFile(path)
}

// restart is the restart verb: tabby-lab restart <node>... [--timeout 60s].
func restart(ctx context.Context, fs *flag.FlagSet, args []string, open func() (*lab.Lab, error)) error {
	timeout := fs.Duration("timeout", 60*time.Second, "how long to wait for the agents to be ready")
	var nodes []string
	for len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		nodes, args = append(nodes, args[0]), args[1:]
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if len(nodes) == 0 {
		return errors.New("restart <node>... [--timeout 60s]")
	}
	l, err := open()
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	if err := l.Restart(ctx, nodes, *timeout); err != nil {
		return err
	}
	fmt.Printf("calico-node of %s running and ready (%s)\n", strings.Join(nodes, ", "), time.Since(start).Round(time.Millisecond))
	return nil
}

// report is the report verb: tabby-lab report <node>.
func report(ctx context.Context, args []string, open func() (*lab.Lab, error)) error {
	if len(args) != 1 {
		return errors.New("report <node>")
	}
	l, err := open()
	if err != nil {
		return err
	}
	defer l.Close()
	rep, err := l.Report(ctx, args[0])
	if err != nil {
		return err
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

// printProbes prints probe results as text (one line each), json or a
// table.
func printProbes(res []lab.ProbeResult, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	case "table":
		fmt.Print(lab.Matrix(res))
	case "text":
		for _, r := range res {
			fmt.Println(r)
		}
	default:
		return fmt.Errorf("-o %q: use text, json or table", output)
	}
	return nil
}

// apply is the apply and delete verbs: apply -f FILE [--timeout 30s],
// on the lab or (tabby-lab cluster apply) on a cluster.
func apply(ctx context.Context, verb string, fs *flag.FlagSet, args []string, open func() (*lab.Lab, error)) error {
	file := fs.String("f", "", "file of resources (YAML, documents separated by ---); - for stdin")
	timeout := fs.Duration("timeout", 30*time.Second, "how long to wait for every node to program the change")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *file == "" {
		return errors.New(verb + " needs -f FILE")
	}
	data, err := readInput(*file)
	if err != nil {
		return err
	}
	l, err := open()
	if err != nil {
		return err
	}
	defer l.Close()
	start := time.Now()
	refs, err := l.Apply(ctx, data, verb == "delete")
	if err != nil {
		return err
	}
	if err := l.WaitProgrammed(ctx, refs, *timeout); err != nil {
		return err
	}
	fmt.Printf("%d policies %s, programmed on every node (%s)\n", len(refs), map[bool]string{true: "deleted", false: "applied"}[verb == "delete"],
		time.Since(start).Round(time.Millisecond))
	return nil
}
