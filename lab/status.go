package lab

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/tabbynet/tabby/lab/internal/harness"
)

// Status writes the lab's nodes (address, calico-node's state: not
// running or paused, else its readiness as its probe reports it; BGP
// sessions) and pods (node, IP, ports) to w.
func (l *Lab) Status(ctx context.Context, w io.Writer) error {
	s := l.State
	fmt.Fprintf(w, "lab %s: %s datastore, %s networking, %s (state %s)\n", s.Prefix, s.Datastore, s.Model.networkingBackend(), s.Phase, l.Dir)
	if g := s.Goldmane; g != nil {
		fmt.Fprintf(w, "flows: %s (the aggregator at %s)\n", g.Page, g.Server)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tADDRESS\tCALICO-NODE\tBGP")
	for i := range s.Nodes {
		n := &s.Nodes[i]
		agent := "ready"
		if why := l.agentState(n); why != "" {
			agent = why
		} else if why := l.agentProbe(ctx, n); why != "" {
			agent = strings.ReplaceAll(why, "\n", "; ")
		}
		bgp := "-"
		if s.Model.networkingBackend() == "bird" {
			sessions, err := l.bgpSessions(ctx, n)
			if err != nil {
				bgp = err.Error()
			} else {
				var parts []string
				for peer, info := range sessions {
					parts = append(parts, peer+" "+strings.Fields(info + " ?")[0])
				}
				sort.Strings(parts)
				bgp = strings.Join(parts, ", ")
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", n.Name, n.Addr, agent, bgp)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POD\tNODE\tIP\tPORTS")
	for _, p := range s.Pods {
		var ports []string
		for _, pt := range p.Ports {
			ports = append(ports, pt.String())
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Key(), p.Node, p.IP, strings.Join(ports, ","))
	}
	return tw.Flush()
}

// Env is the shell exports that point calicoctl and kubectl at the lab.
// Calico's calicoctl reads BIRD's socket at a fixed path on the node it
// runs on; the lab has several nodes on one host, so the env also
// defines a calicoctl shell function that gives `calicoctl node status`
// the socket of node $TABBY_LAB_NODE (default the first node) with
// Tabby's --bird-socket, and passes everything else through.
func (l *Lab) Env() string {
	var b strings.Builder
	path := l.Bin
	if l.State.Datastore == DatastoreKubernetes {
		fmt.Fprintf(&b, "export DATASTORE_TYPE=kubernetes\nexport KUBECONFIG=%s\n", l.State.Kubeconfig)
		path += ":" + KubeBinDir()
	} else {
		fmt.Fprintf(&b, "export DATASTORE_TYPE=etcdv3\nexport ETCD_ENDPOINTS=%s\n", l.State.EtcdURL)
	}
	fmt.Fprintf(&b, "export PATH=%s:$PATH\n", path)
	if len(l.State.Nodes) > 0 && l.State.Model.networkingBackend() == "bird" {
		nodes := filepath.Join(l.Dir, "nodes")
		fmt.Fprintf(&b, "export TABBY_LAB_NODE=${TABBY_LAB_NODE:-%s}\n", l.State.Nodes[0].Name)
		fmt.Fprintf(&b, "# calicoctl node status: BIRD of node $TABBY_LAB_NODE\n")
		fmt.Fprintf(&b, "calicoctl() { if [ \"$1\" = node ] && [ \"$2\" = status ]; then shift 2; command calicoctl node status --bird-socket=%s/\"$TABBY_LAB_NODE\"/bird.ctl \"$@\"; else command calicoctl \"$@\"; fi; }\n", nodes)
	}
	return b.String()
}

// Exec runs a command inside a pod's network namespace (target
// "<namespace>/<pod>") or a node's (target "<node>"), with this process's
// standard streams.
func (l *Lab) Exec(target string, argv []string) error {
	if l.State.VMs {
		return l.execVM(target, argv)
	}
	netns := ""
	for _, p := range l.State.Pods {
		if p.Key() == target {
			netns = p.Netns
		}
	}
	for _, n := range l.State.Nodes {
		if n.Name == target {
			netns = n.Netns
		}
	}
	if netns == "" {
		return fmt.Errorf("no pod or node %q in the lab (see tabby-lab status)", target)
	}
	if len(argv) == 0 {
		return fmt.Errorf("no command: tabby-lab exec %s -- <command>", target)
	}
	cmd := exec.Command("nsenter", append([]string{"--net=" + filepath.Join(harness.NetnsDir, netns), "--"}, argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	return cmd.Run()
}
