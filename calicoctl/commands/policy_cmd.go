package commands

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// newPolicyCmd is `calicoctl policy`: which policies apply to an
// endpoint and what they do to a flow, from felix's own calculation
// over the datastore (Tabby's; Calico's calicoctl has no such command).
func newPolicyCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Explain policy: trace a flow, show an endpoint's policies, name a chain",
		Example: `  calicoctl policy trace --from dev/tester --to shop/backend --port tcp/8080
  calicoctl policy show shop/backend
  calicoctl policy chain cali-pi-_HP4W459tOSxdMbBc_yJ`,
	}
	cmd.AddCommand(newPolicyTraceCmd(a), newPolicyShowCmd(a), newPolicyChainCmd(a))
	return cmd
}

func newPolicyTraceCmd(a *app) *cobra.Command {
	var from, to, port, output string
	var files []string
	var srcPort uint16
	cmd := &cobra.Command{
		Use:   "trace --from SRC --to DST --port PROTO/PORT",
		Short: "Trace a flow through the policy felix enforces for it",
		Long: `Trace the first packet of a flow through the chains felix programs for it,
with felix's own calculation over the datastore's current contents: egress at
the source, ingress at the destination (and host endpoint chains on the way),
each tier in order, each policy that selects the endpoint with the first rule
that matches, Pass hops, end-of-tier actions, profiles and the verdict. Staged
policies are traced too, as pending verdicts. --with-file adds or replaces
policies as if applied (nothing is written).

SRC and DST are <namespace>/<pod>, hostendpoint/<name>, or an IP address (an
address outside the cluster is matched by nets and network sets only).
Replies and later packets of an allowed connection are accepted by conntrack.`,
		Example: `  calicoctl policy trace --from dev/tester --to shop/backend --port tcp/8080
  calicoctl policy trace --from 10.1.2.3 --to shop/backend --port tcp/443 --with-file new-policy.yaml -o yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" || to == "" || port == "" {
				return fmt.Errorf("--from, --to and --port are required")
			}
			pkt, err := parsePort(port, srcPort)
			if err != nil {
				return err
			}
			s, err := a.policySnapshot(cmd.Context(), files)
			if err != nil {
				return err
			}
			rep, err := traceFlow(s, from, to, pkt)
			if err != nil {
				return err
			}
			return writePolicyOutput(a.stdout, output, rep, func(w io.Writer) { printTrace(w, rep) })
		},
	}
	cmd.Flags().StringVar(&from, "from", "", "source: <namespace>/<pod>, hostendpoint/<name> or an IP")
	cmd.Flags().StringVar(&to, "to", "", "destination: <namespace>/<pod>, hostendpoint/<name> or an IP")
	cmd.Flags().StringVar(&port, "port", "", "protocol and destination port: tcp/80, udp/53, sctp/9, icmp, icmp/TYPE[/CODE]")
	cmd.Flags().Uint16Var(&srcPort, "src-port", 0, "source port of the packet (rules matching source ports)")
	cmd.Flags().StringArrayVar(&files, "with-file", nil, "Calico policy resources (policies, tiers, network sets, staged policies) to trace as if applied (repeatable)")
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: text (default), yaml or json")
	return cmd
}

// policySnapshot loads what a trace reads, with the files' resources as
// if applied.
func (a *app) policySnapshot(ctx context.Context, files []string) (*policySnapshot, error) {
	var extra []v3.Resource
	if len(files) > 0 {
		ins, err := a.readInputs(files, inputOptions{validate: true})
		if err != nil {
			return nil, err
		}
		for _, in := range ins {
			extra = append(extra, in.r)
		}
	}
	if ctx == nil {
		ctx = context.Background()
	}
	c, err := a.client()
	if err != nil {
		return nil, err
	}
	defer c.Close()
	s, err := loadPolicySnapshot(ctx, c)
	if err != nil {
		return nil, err
	}
	if err := s.apply(extra); err != nil {
		return nil, err
	}
	return s, nil
}

// writePolicyOutput prints v as YAML or JSON, or as text.
func writePolicyOutput(w io.Writer, output string, v any, text func(io.Writer)) error {
	switch output {
	case "", "text":
		text(w)
		return nil
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case "json":
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", "  ")
		if err := enc.Encode(v); err != nil {
			return err
		}
		_, err := w.Write(b.Bytes())
		return err
	}
	return fmt.Errorf("unknown output format %q: want text, yaml or json", output)
}
