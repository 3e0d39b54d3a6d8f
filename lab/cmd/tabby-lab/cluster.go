package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tabbynet/tabby/lab"
	"github.com/tabbynet/tabby/lab/cluster"
)

const clusterUsage = `Usage: tabby-lab cluster <verb> [flags]

A real Kubernetes cluster (kubelet, containerd, kube-proxy in node
namespaces) with Tabby installed by kubectl apply; see lab/cluster.

  up [--nodes N] [--subnets S] [--datastore kubernetes|etcdv3]
     [--pool-mode vxlan|vxlan-crosssubnet|bgp] [--manifest FILE] [--image FILE]
     [--dns]  (CoreDNS as the cluster DNS: hack/build-coredns.sh)
     [--vm-nodes N]  (N more nodes that are qemu VMs on Debian's kernel,
              vm-1..: SCTP; hack/build-vm-image.sh, ~2-5 min to Ready)
  vm-check  pods on the VM nodes reach the others' (TCP, VXLAN) and each
            other (SCTP), through kubectl exec of agnhost connect
  down      remove everything of the cluster (also after a crash)
  status    nodes and pods
  env       exports pointing kubectl and calicoctl at the cluster
  e2e [--suite netpol|netpol-sctp|network] [--focus RE] [--skip RE] [--procs N]
      [--report-dir DIR]
            run the upstream e2e.test (default: the NetworkPolicy e2e;
            netpol-sctp: its SCTP specs, on the VM nodes only (the others
            tainted for the run; a cluster up with --vm-nodes); network:
            the [sig-network] [Conformance] specs, on a cluster up with
            --dns) against the cluster; prints "N passed, N failed,
            N skipped"
  apply -f FILE [--timeout 30s]
            Calico v3 resources (calicoctl) and Kubernetes NetworkPolicies
            (the API; with etcd kube-controllers stores them); returns once
            every node's felix programmed them
  delete -f FILE [--timeout 30s]
            the same, removed
  chaos [--pods N] [--outage 30s] [--power-off 15s] [--faults LIST] [--seed N]
            faults in turn under churn (agent-kill, agent-delete,
            power-loss, datastore, roll, node-replace), watched
            throughout; prints each fault's figures and one line per
            invariant, exits 1 on a violation ($TABBY_CHAOS_PODS sizes
            the churn)
  probe [-n NS,...] [--port 8080] [-o text|json|table] [--timeout 1s]
            a TCP connection from every running pod of the namespaces
            (default: default) to every other one on the port: allow when
            the target's kernel accepts it

--state defaults to $TABBY_CLUSTER_STATE or /run/tabby-cluster, --kube-bin
to $TABBY_KUBE_BIN or ~/.cache/tabby-kube/bin.
`

// runCluster runs `tabby-lab cluster <verb>`.
func runCluster(ctx context.Context, bin string, args []string) error {
	fs := flag.NewFlagSet("tabby-lab cluster", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, clusterUsage) }
	state := envOr("TABBY_CLUSTER_STATE", cluster.DefaultStateDir)
	home, _ := os.UserHomeDir()
	kubeBin := envOr("TABBY_KUBE_BIN", filepath.Join(home, ".cache", "tabby-kube", "bin"))
	fs.StringVar(&state, "state", state, "the cluster's state folder")
	fs.StringVar(&kubeBin, "kube-bin", kubeBin, "folder of the Kubernetes binaries")
	if len(args) == 0 {
		fs.Usage()
		return flag.ErrHelp
	}
	verb := args[0]
	o := cluster.Options{Dir: state, Bin: bin, Out: os.Stdout}
	if verb == "up" {
		fs.IntVar(&o.Nodes, "nodes", 3, "number of nodes")
		fs.IntVar(&o.Subnets, "subnets", 2, "number of underlay subnets the nodes are spread over")
		fs.StringVar(&o.Datastore, "datastore", cluster.DatastoreKubernetes, "kubernetes or etcdv3")
		fs.StringVar(&o.PoolMode, "pool-mode", "vxlan", "vxlan, vxlan-crosssubnet or bgp")
		fs.StringVar(&o.Manifest, "manifest", "", "manifest to apply (default manifests/tabby.yaml, tabby-etcd.yaml with etcdv3)")
		fs.StringVar(&o.ImageTar, "image", filepath.Join(bin, "tabby-image.tar"), "the Tabby image tarball")
		fs.BoolVar(&o.DNS, "dns", false, "run CoreDNS as the cluster DNS (hack/build-coredns.sh)")
		fs.IntVar(&o.VMNodes, "vm-nodes", 0, "number of nodes that are qemu VMs on Debian's kernel (SCTP)")
	}
	var e2e cluster.E2EOptions
	var suite string
	if verb == "e2e" {
		e2eFlags(fs, &e2e, &suite, kubeBin)
	}
	var chaos cluster.ChaosOptions
	var faults string
	if verb == "chaos" {
		chaosFlags(fs, &chaos, &faults)
	}
	var probe probeFlags
	if verb == "probe" {
		probe.define(fs)
	}
	if verb == "apply" || verb == "delete" {
		return clusterApply(ctx, verb, bin, state, kubeBin, args[1:])
	}
	if verb == "forward" {
		fs.StringVar(&state, "netns", "", "namespace to dial in")
	}
	var kubeconfig string
	if verb == "pod-routes" {
		fs.StringVar(&kubeconfig, "kubeconfig", "", "the control plane's kubeconfig")
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	o.Dir, o.KubeBin = state, kubeBin
	switch verb {
	case "up":
		if o.Manifest == "" {
			o.Manifest = map[bool]string{true: "manifests/tabby-etcd.yaml", false: "manifests/tabby.yaml"}[o.Datastore == cluster.DatastoreEtcd]
		}
		_, err := cluster.Up(ctx, o)
		return err
	case "down":
		if err := cluster.Down(state); err != nil {
			return err
		}
		fmt.Println("cluster removed")
		return nil
	case "forward":
		return cluster.Forward(ctx, state, fs.Args())
	case "pod-routes":
		return cluster.PodRoutes(ctx, kubeconfig)
	case "e2e":
		if err := e2eSuite(fs, &e2e, suite); err != nil {
			return err
		}
		return runE2E(ctx, state, bin, kubeBin, e2e)
	case "chaos":
		return runChaos(ctx, state, bin, kubeBin, chaos, faults)
	case "probe":
		c, err := cluster.Open(state, bin, kubeBin, os.Stdout)
		if err != nil {
			return err
		}
		res, err := c.Probe(ctx, strings.Split(probe.namespaces, ","), probe.port, probe.timeout)
		if err != nil {
			return err
		}
		return printProbes(res, probe.output)
	case "status", "env", "vm-check":
		c, err := cluster.Open(state, bin, kubeBin, os.Stdout)
		if err != nil {
			return err
		}
		if verb == "vm-check" {
			return c.CheckVMNodes(ctx, os.Stdout)
		}
		if verb == "env" {
			fmt.Print(c.Env())
			return nil
		}
		return c.Status(ctx, os.Stdout)
	}
	fs.Usage()
	return errors.New("unknown cluster verb " + verb)
}

// clusterApply is `tabby-lab cluster apply|delete -f FILE`: the lab's
// apply over the cluster (Cluster.Lab).
func clusterApply(ctx context.Context, verb, bin, state, kubeBin string, args []string) error {
	fs := flag.NewFlagSet("tabby-lab cluster "+verb, flag.ContinueOnError)
	fs.StringVar(&state, "state", state, "the cluster's state folder")
	fs.StringVar(&kubeBin, "kube-bin", kubeBin, "folder of the Kubernetes binaries")
	return apply(ctx, verb, fs, args, func() (*lab.Lab, error) {
		c, err := cluster.Open(state, bin, kubeBin, os.Stdout)
		if err != nil {
			return nil, err
		}
		return c.Lab(os.Stdout), nil
	})
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// probeFlags are `tabby-lab cluster probe`'s flags (each verb defines only
// its own: e2e has a --timeout of its own).
type probeFlags struct {
	namespaces, output string
	port               int
	timeout            time.Duration
}

func (p *probeFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&p.namespaces, "n", "default", "namespaces to probe, comma-separated")
	fs.IntVar(&p.port, "port", 8080, "TCP port to probe")
	fs.StringVar(&p.output, "o", "text", "text, json or table")
	fs.DurationVar(&p.timeout, "timeout", time.Second, "per-probe timeout")
}
