package commands

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// EndpointPolicies is `policy show`'s result: the policies and profiles
// felix applies to one endpoint, per direction in evaluation order, and
// the staged policies that would select it.
type EndpointPolicies struct {
	Endpoint TracePeer `json:"endpoint"`
	// Lists holds, per list (ingress, egress; for a host endpoint also
	// forwardIngress, forwardEgress, preDNATIngress, doNotTrackIngress,
	// doNotTrackEgress), the tiers that apply.
	Lists    []PolicyList  `json:"lists"`
	Profiles []ShowProfile `json:"profiles"`
	// Pending are the lists with the staged policies enforced, when any
	// staged policy exists.
	Pending []PolicyList `json:"pending,omitempty"`
}

// PolicyList is one list of an endpoint's tiers.
type PolicyList struct {
	Name  string     `json:"name"`
	Chain string     `json:"chain"`
	Tiers []ShowTier `json:"tiers"`
}

// ShowTier is one tier of a list.
type ShowTier struct {
	Name          string       `json:"name"`
	DefaultAction string       `json:"defaultAction"`
	Policies      []ShowPolicy `json:"policies"`
}

// ShowPolicy is one policy of a tier.
type ShowPolicy struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Chain     string `json:"chain"`
}

// ShowProfile is one profile with its chains.
type ShowProfile struct {
	Name         string `json:"name"`
	IngressChain string `json:"ingressChain"`
	EgressChain  string `json:"egressChain"`
}

func newPolicyShowCmd(a *app) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "show <namespace>/<pod>|hostendpoint/<name>|<ip>",
		Short: "Show the policies and profiles that apply to an endpoint, in order",
		Example: `  calicoctl policy show shop/backend
  calicoctl policy show hostendpoint/node1-eth0 -o yaml`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := a.policySnapshot(cmd.Context(), nil)
			if err != nil {
				return err
			}
			ep, err := showEndpoint(s, args[0])
			if err != nil {
				return err
			}
			return writePolicyOutput(a.stdout, output, ep, func(w io.Writer) { printShow(w, ep) })
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "", "output format: text (default), yaml or json")
	return cmd
}

// showEndpoint runs felix's calculation for the endpoint's node, narrowed
// to the endpoint.
func showEndpoint(s *policySnapshot, spec string) (*EndpointPolicies, error) {
	end, err := resolveEnd(s.objs, spec)
	if err != nil {
		return nil, err
	}
	if end.wep == nil && end.hep == nil {
		return nil, fmt.Errorf("%s: no endpoint holds this address", spec)
	}
	staged, err := s.stagedPolicies()
	if err != nil {
		return nil, err
	}
	for _, v := range []int{4, 6} {
		if as := end.addrs(v); len(as) > 0 && !end.addr.IsValid() {
			end.addr = as[0]
		}
	}
	out := &EndpointPolicies{Endpoint: end.peer(), Profiles: []ShowProfile{}}
	ep, err := focusedEndpoint(s.objs, end)
	if err != nil {
		return nil, err
	}
	x := newPolicyIndex(s.objs)
	out.Lists = showLists(x, end, ep)
	for _, p := range ep.Profiles {
		out.Profiles = append(out.Profiles, ShowProfile{Name: p,
			IngressChain: rules.ProfileChainName(rules.PrefixProfileIn, p), EgressChain: rules.ProfileChainName(rules.PrefixProfileOut, p)})
	}
	if len(staged) > 0 {
		pobjs := s.pendingObjects(staged)
		pep, err := focusedEndpoint(pobjs, end)
		if err != nil {
			return nil, err
		}
		out.Pending = showLists(newPolicyIndex(pobjs), end, pep)
	}
	return out, nil
}

func focusedEndpoint(objs []any, end traceEnd) (*calc.Endpoint, error) {
	in := calc.Input{Node: end.node()}
	for _, o := range objs {
		in.Add(o)
	}
	res := calc.ComputeFocused(in, calc.Focus{Endpoints: []calc.EndpointRef{end.ref()}})
	for i := range res.Endpoints {
		if ep := &res.Endpoints[i]; ep.Kind == end.ref().Kind && ep.Key == end.ref().Key {
			return ep, nil
		}
	}
	var why []string
	for _, p := range res.Problems {
		why = append(why, p.String())
	}
	return nil, fmt.Errorf("felix does not program endpoint %s: %s", end.ref().Key, strings.Join(why, "; "))
}

// showLists are the endpoint's tier lists with the chains felix renders
// for them.
func showLists(x *policyIndex, end traceEnd, ep *calc.Endpoint) []PolicyList {
	type list struct {
		name, chain string
		ingress     bool
		tiers       []calc.TierPolicies
	}
	var lists []list
	if end.wep != nil {
		iface := end.wep.Spec.InterfaceName
		lists = []list{{"ingress", rules.PrefixToWorkload + iface, true, ep.Ingress}, {"egress", rules.PrefixFromWorkload + iface, false, ep.Egress}}
	} else {
		suffix := end.hep.Spec.InterfaceName
		if suffix == "*" {
			suffix = rules.AllInterfaces
		}
		lists = []list{
			{"ingress", rules.PrefixFromHostEp + suffix, true, ep.Ingress}, {"egress", rules.PrefixToHostEp + suffix, false, ep.Egress},
			{"forwardIngress", rules.PrefixFromHostEpFwd + suffix, true, ep.ForwardIngress},
			{"forwardEgress", rules.PrefixToHostEpFwd + suffix, false, ep.ForwardEgress},
			{"preDNATIngress", "mangle " + rules.PrefixFromHostEp + suffix, true, ep.PreDNATIngress},
			{"doNotTrackIngress", "raw " + rules.PrefixFromHostEp + suffix, true, ep.UntrackedIngress},
			{"doNotTrackEgress", "raw " + rules.PrefixToHostEp + suffix, false, ep.UntrackedEgress},
		}
	}
	var out []PolicyList
	for _, l := range lists {
		prefix := rules.PrefixPolicyOut
		if l.ingress {
			prefix = rules.PrefixPolicyIn
		}
		pl := PolicyList{Name: l.name, Chain: l.chain, Tiers: []ShowTier{}}
		for _, t := range l.tiers {
			st := ShowTier{Name: t.Tier, DefaultAction: string(t.DefaultAction), Policies: []ShowPolicy{}}
			for _, id := range t.Policies {
				st.Policies = append(st.Policies, ShowPolicy{Kind: x.kindOf(id), Namespace: id.Namespace, Name: x.nameOf(id),
					Chain: x.chainOf(prefix, id)})
			}
			pl.Tiers = append(pl.Tiers, st)
		}
		out = append(out, pl)
	}
	return out
}

func printShow(w io.Writer, e *EndpointPolicies) {
	fmt.Fprintf(w, "Endpoint: %s %s, node %s\n", e.Endpoint.Kind, peerLabel(e.Endpoint), e.Endpoint.Node)
	printLists(w, e.Lists)
	fmt.Fprintf(w, "\nProfiles (after the tiers, or alone when no policy applies in a direction):\n")
	if len(e.Profiles) == 0 {
		fmt.Fprintf(w, "  none: traffic no policy allowed is dropped\n")
	}
	for _, p := range e.Profiles {
		fmt.Fprintf(w, "  %s [%s, %s]\n", p.Name, p.IngressChain, p.EgressChain)
	}
	if e.Pending != nil {
		fmt.Fprintf(w, "\nWith the staged policies enforced:")
		printLists(w, e.Pending)
	}
}

func printLists(w io.Writer, lists []PolicyList) {
	for _, l := range lists {
		if len(l.Tiers) == 0 && l.Name != "ingress" && l.Name != "egress" {
			continue
		}
		fmt.Fprintf(w, "\n%s [%s]:\n", l.Name, l.Chain)
		if len(l.Tiers) == 0 {
			fmt.Fprintf(w, "  no policy: the profiles decide\n")
		}
		for _, t := range l.Tiers {
			fmt.Fprintf(w, "  tier %s (end of tier: %s)\n", t.Name, t.DefaultAction)
			for i, p := range t.Policies {
				name := p.Name
				if p.Namespace != "" {
					name = p.Namespace + "/" + p.Name
				}
				fmt.Fprintf(w, "    %d. %s %s [%s]\n", i+1, p.Kind, name, chainLabel(p.Kind, p.Chain))
			}
		}
	}
}
