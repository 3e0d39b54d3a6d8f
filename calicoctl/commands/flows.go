package commands

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/felix/collector"
)

// flowsOptions are calicoctl flows' flags.
type flowsOptions struct {
	namespace, pod, action, output string
	follow                         bool
	sockets                        []string
}

func newFlowsCmd(a *app) *cobra.Command {
	o := flowsOptions{}
	cmd := &cobra.Command{
		Use:   "flows",
		Short: "Show this node's flow logs: who talked to whom and which policy decided",
		Long: `Show the flows felix's collector logged on this node (FlowLogsLocalReporter:
Enabled), read from its flow socket, like hubble observe: each flow's
endpoints, port, the reporting side (INGRESS at the destination's policy,
EGRESS at the source's), the verdict and the tier, policy and rule that
gave it, with any Pass on the way. Flows appear once per
FlowLogsFlushInterval. Give --socket once per node to read several.`,
		Example: `  calicoctl flows --action deny
  calicoctl flows --namespace shop --follow
  calicoctl flows --pod dev/tester -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.flows(cmdContext(cmd), o)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "only flows from or to this namespace")
	f.StringVar(&o.pod, "pod", "", "only flows from or to this pod ([namespace/]name)")
	f.StringVar(&o.action, "action", "", "only flows with this verdict: allow or deny")
	f.BoolVarP(&o.follow, "follow", "f", false, "keep printing flows as they are flushed")
	f.StringVarP(&o.output, "output", "o", "text", "output format: text or json (one flow per line)")
	f.StringSliceVar(&o.sockets, "socket", []string{filepath.Join(collector.SocketDir, collector.SocketName)}, "the node's flow socket(s)")
	return cmd
}

func (a *app) flows(ctx context.Context, o flowsOptions) error {
	switch strings.ToLower(o.action) {
	case "", "allow", "deny":
	default:
		return fmt.Errorf("--action %q: use allow or deny", o.action)
	}
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q: use text or json", o.output)
	}
	q := url.Values{}
	for k, v := range map[string]string{"namespace": o.namespace, "pod": o.pod, "action": o.action} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.follow {
		q.Set("follow", "true")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lines := make(chan []byte)
	errs := make(chan error, len(o.sockets))
	for _, s := range o.sockets {
		go func() { errs <- readFlows(ctx, s, q, lines) }()
	}
	for pending := len(o.sockets); pending > 0; {
		select {
		case err := <-errs:
			if err != nil {
				return err
			}
			pending--
		case l := <-lines:
			if err := printFlow(a.stdout, l, o.output); err != nil {
				return err
			}
		}
	}
	return nil
}

// readFlows streams one socket's flows (JSON lines) into lines.
func readFlows(ctx context.Context, socket string, q url.Values, lines chan<- []byte) error {
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://node/flows?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("reading flows from %s (is FlowLogsLocalReporter Enabled on this node?): %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("reading flows from %s: %s", socket, resp.Status)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		l := append([]byte(nil), sc.Bytes()...)
		select {
		case lines <- l:
		case <-ctx.Done():
			return nil
		}
	}
	if err := sc.Err(); err != nil && ctx.Err() == nil {
		return fmt.Errorf("reading flows from %s: %w", socket, err)
	}
	return nil
}

func printFlow(w io.Writer, line []byte, output string) error {
	if output == "json" {
		_, err := fmt.Fprintf(w, "%s\n", line)
		return err
	}
	var f collector.Flow
	if err := json.Unmarshal(line, &f); err != nil {
		return fmt.Errorf("a flow the node sent does not decode: %w", err)
	}
	_, err := fmt.Fprintln(w, FlowLine(&f))
	return err
}

// FlowLine is one flow as calicoctl flows prints it:
//
//	04:33:58 node1 dev/client 10.65.0.3 -> prod/web 10.65.0.1:8080/tcp INGRESS DENIED by default np prod/web rule 0 [pass: security gnp security.pass-prod rule 0] packets=3 bytes=180 conns=0
func FlowLine(f *collector.Flow) string {
	dir := "EGRESS"
	if f.Reporter == "Dst" {
		dir = "INGRESS"
	}
	verdict := map[string]string{"Allow": "ALLOWED", "Deny": "DENIED"}[f.Action]
	if verdict == "" {
		verdict = strings.ToUpper(f.Action)
	}
	var by string
	var passes []string
	for i, h := range f.Enforced {
		if i == len(f.Enforced)-1 {
			by = hitText(h)
		} else {
			passes = append(passes, hitText(h))
		}
	}
	s := fmt.Sprintf("%s %s %s %s -> %s %s:%d/%s %s %s by %s", f.EndTime.Local().Format("Jan _2 15:04:05"), f.Node,
		endpointText(f.Source), f.SourceIP, endpointText(f.Dest), f.DestIP, f.DestPort, f.Proto, dir, verdict, by)
	if len(passes) > 0 {
		s += " [pass: " + strings.Join(passes, "; ") + "]"
	}
	if p := pendingText(f); p != "" {
		s += " [pending: " + p + "]"
	}
	return s + fmt.Sprintf(" packets=%d bytes=%d conns=%d", f.Packets, f.Bytes, f.ConnectionsStarted)
}

// pendingText is the flow's pending verdict (staged policies as if
// enforced) when its path differs from the enforced one: the deciding
// hit and its action, after any Pass.
func pendingText(f *collector.Flow) string {
	if len(f.Pending) == 0 || pathText(f.Pending) == pathText(f.Enforced) {
		return ""
	}
	last := f.Pending[len(f.Pending)-1]
	return strings.ToLower(last.Action) + " by " + hitText(last)
}

func pathText(hits []collector.PolicyHit) string {
	parts := make([]string, len(hits))
	for i, h := range hits {
		parts[i] = h.Action + " " + hitText(h)
	}
	return strings.Join(parts, "; ")
}

func endpointText(e collector.Endpoint) string {
	switch e.Kind {
	case "wep":
		return e.Namespace + "/" + e.Name
	case "ns":
		return "networkset:" + e.Namespace + "/" + e.Name
	case "gns":
		return "globalnetworkset:" + e.Name
	case "hep":
		return "hostendpoint:" + e.Name
	}
	return e.Name
}

func hitText(h collector.PolicyHit) string {
	switch h.Kind {
	case "eot":
		return "end of tier " + h.Tier
	case "pro":
		if h.Name == "" {
			return "no profile allowed"
		}
		return fmt.Sprintf("profile %s rule %d", h.Name, h.RuleIndex)
	}
	name := h.Name
	if h.Namespace != "" {
		name = h.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s %s rule %d", h.Tier, h.Kind, name, h.RuleIndex)
}
