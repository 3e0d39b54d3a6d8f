package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/rules"
)

// ChainOwner is what felix renders one chain for.
type ChainOwner struct {
	Chain     string `json:"chain"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Tier      string `json:"tier,omitempty"`
	Direction string `json:"direction"`
}

func newPolicyChainCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "chain <chain-name>",
		Short: "Name the policy, profile or endpoint an iptables chain (cali-pi-, cali-po-, cali-pri-, cali-pro-, ...) belongs to",
		Long: `Name what felix renders an iptables chain for, running felix's own chain naming
over the datastore's policies, profiles and endpoints: cali-pi-/cali-po- (a
policy's ingress/egress rules), cali-pri-/cali-pro- (a profile's),
cali-tw-/cali-fw- (a workload's ingress/egress), cali-fh-/cali-th-/cali-fhfw-/
cali-thfw- (a host endpoint's).`,
		Example: `  calicoctl policy chain cali-pi-_Hx3bU7dmZ2bQ4xGBf0Mg`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.policySnapshot(cmd.Context(), nil)
			if err != nil {
				return err
			}
			owners, err := chainOwners(s, args[0])
			if err != nil {
				return err
			}
			return writePolicyOutput(a.stdout, output, owners, func(w io.Writer) {
				for _, o := range owners {
					name := o.Name
					if o.Namespace != "" {
						name = o.Namespace + "/" + o.Name
					}
					tier := ""
					if o.Tier != "" {
						tier = " (tier " + o.Tier + ")"
					}
					fmt.Fprintf(w, "%s: %s of %s %s%s\n", o.Chain, o.Direction, o.Kind, name, tier)
				}
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: text (default), yaml or json")
	return cmd
}

// chainOwners finds what chain is rendered for (several owners only when
// chain names collide, which felix's hashing makes improbable).
func chainOwners(s *policySnapshot, chain string) ([]ChainOwner, error) {
	var out []ChainOwner
	add := func(name string, o ChainOwner) {
		if name == chain {
			o.Chain = chain
			out = append(out, o)
		}
	}
	x := newPolicyIndex(s.objs)
	for _, o := range s.objs {
		switch o := o.(type) {
		case *v3.NetworkPolicy, *v3.GlobalNetworkPolicy:
			id, _ := policyID(o.(v3.Resource))
			owner := ChainOwner{Kind: x.kindOf(id), Namespace: id.Namespace, Name: id.Name, Tier: id.Tier}
			owner.Direction = "ingress"
			add(rules.PolicyChainName(rules.PrefixPolicyIn, id), owner)
			owner.Direction = "egress"
			add(rules.PolicyChainName(rules.PrefixPolicyOut, id), owner)
		case *v3.Profile:
			add(rules.ProfileChainName(rules.PrefixProfileIn, o.Name), ChainOwner{Kind: v3.KindProfile, Name: o.Name, Direction: "ingress"})
			add(rules.ProfileChainName(rules.PrefixProfileOut, o.Name), ChainOwner{Kind: v3.KindProfile, Name: o.Name, Direction: "egress"})
		case *v3.WorkloadEndpoint:
			owner := ChainOwner{Kind: v3.KindWorkloadEndpoint, Namespace: o.Namespace, Name: o.Name}
			owner.Direction = "ingress"
			add(rules.PrefixToWorkload+o.Spec.InterfaceName, owner)
			owner.Direction = "egress"
			add(rules.PrefixFromWorkload+o.Spec.InterfaceName, owner)
		case *v3.HostEndpoint:
			hostChains(o, add)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no policy, profile or endpoint in the datastore has chain %q (felix's chains: cali-pi-, cali-po-, cali-pri-, cali-pro-, cali-tw-, cali-fw-, cali-fh-, cali-th-, cali-fhfw-, cali-thfw-)", chain)
	}
	return out, nil
}

func hostChains(h *v3.HostEndpoint, add func(string, ChainOwner)) {
	suffix := h.Spec.InterfaceName
	if suffix == "*" {
		suffix = rules.AllInterfaces
	}
	if suffix == "" || strings.ContainsAny(suffix, " ") {
		return
	}
	for _, c := range []struct{ prefix, dir string }{
		{rules.PrefixFromHostEp, "ingress"}, {rules.PrefixToHostEp, "egress"},
		{rules.PrefixFromHostEpFwd, "forward ingress"}, {rules.PrefixToHostEpFwd, "forward egress"},
	} {
		add(c.prefix+suffix, ChainOwner{Kind: v3.KindHostEndpoint, Name: h.Name, Direction: c.dir})
	}
}
