package lab

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tabbynet/tabby/api/selector"
	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/dataplane"
	"github.com/tabbynet/tabby/felix/rules"
)

// PolicyRef is a policy an apply or delete touched, as felix knows it.
type PolicyRef struct {
	Tier, Namespace, Name string
	Selector              string
	// NamespaceSelector of a GlobalNetworkPolicy.
	NamespaceSelector string
	Types             []v3.PolicyType
	Deleted           bool
	// Policy is the policy as felix reads it (*v3.NetworkPolicy or
	// *v3.GlobalNetworkPolicy), when the apply knows it; nil: read back
	// from the datastore.
	Policy v3.Resource
}

// chains are the iptables chains felix renders the policy into on a node
// where it selects an endpoint (cali-pi-/cali-po- per direction).
func (r PolicyRef) chains() []string {
	id := calc.PolicyID{Tier: r.Tier, Namespace: r.Namespace, Name: r.Name}
	var out []string
	for _, t := range r.Types {
		switch t {
		case v3.PolicyTypeIngress:
			out = append(out, rules.PolicyChainName(rules.PrefixPolicyIn, id))
		case v3.PolicyTypeEgress:
			out = append(out, rules.PolicyChainName(rules.PrefixPolicyOut, id))
		}
	}
	return out
}

// selects reports whether the policy applies to pod p (labels as felix
// sees them: the pod's, Calico's projectcalico.org ones and the
// namespace's profile labels).
func (l *Lab) selects(r PolicyRef, p PodState) (bool, error) {
	if r.Namespace != "" && r.Namespace != p.Namespace {
		return false, nil
	}
	labels, ns := l.felixLabels(p)
	nsLabels := map[string]string{"projectcalico.org/name": p.Namespace}
	for k, v := range ns {
		nsLabels[k] = v
	}
	for k, v := range nsLabels {
		labels["pcns."+k] = v
	}
	sel := r.Selector
	if sel == "" {
		sel = "all()"
	}
	s, err := selector.Parse(sel)
	if err != nil {
		return false, fmt.Errorf("policy %s: selector: %w", r.Name, err)
	}
	if !s.Evaluate(labels) {
		return false, nil
	}
	if r.NamespaceSelector != "" {
		ns, err := selector.Parse(r.NamespaceSelector)
		if err != nil {
			return false, fmt.Errorf("policy %s: namespaceSelector: %w", r.Name, err)
		}
		return ns.Evaluate(nsLabels), nil
	}
	return true, nil
}

// chainWant is what a node's filter table must show of one chain.
type chainWant struct {
	present bool
	// hashes are the rule hashes of the body felix renders for the
	// policy as it is now (see expected.go), in order.
	hashes []string
}

// WaitProgrammed waits until every node has programmed the policies: a
// policy's chains are in the node's iptables where it selects one of the
// node's pods, referenced from that pod's chains and holding exactly the
// rules felix renders for the policy as stored now (so an edit of an
// existing policy is waited for too), and gone from every node once
// deleted. After timeout it names the nodes that lag and why.
func (l *Lab) WaitProgrammed(ctx context.Context, refs []PolicyRef, timeout time.Duration) error {
	want := map[string]map[string]chainWant{} // node -> chain -> want
	for _, n := range l.State.Nodes {
		want[n.Name] = map[string]chainWant{}
	}
	for _, r := range refs {
		var bodies map[string][]string
		for _, p := range l.State.Pods {
			if r.Deleted {
				break
			}
			ok, err := l.selects(r, p)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			if bodies == nil {
				// The chains' bodies depend on the policy only.
				if bodies, err = l.expectedRuleHashes(ctx, r, p); err != nil {
					return err
				}
			}
			for _, c := range r.chains() {
				want[p.Node][c] = chainWant{present: true, hashes: bodies[c]}
			}
		}
		for _, n := range l.State.Nodes {
			for _, c := range r.chains() {
				if _, ok := want[n.Name][c]; !ok {
					want[n.Name][c] = chainWant{}
				}
			}
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		lag := map[string]string{}
		_ = parallel(len(l.State.Nodes), func(i int) error {
			n := l.State.Nodes[i]
			why, err := nodeProgrammed(ctx, n, want[n.Name])
			if err != nil {
				// iptables-save can fail while felix rewrites the table
				// (nft: "Set with index N in kernel doesn't exist"): ask
				// again, and name it if it lasts.
				why = err.Error()
			}
			if why != "" {
				l.mu.Lock()
				lag[n.Name] = why
				l.mu.Unlock()
			}
			return nil
		})
		if len(lag) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			var names []string
			for n, why := range lag {
				names = append(names, n+" ("+why+")")
			}
			sort.Strings(names)
			return fmt.Errorf("not programmed within %s on: %s", timeout, strings.Join(names, ", "))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// nodeProgrammed compares the node's filter table with want and says what
// differs ("" when nothing).
func nodeProgrammed(ctx context.Context, n NodeState, want map[string]chainWant) (string, error) {
	if n.VM != nil {
		r, err := n.VM.vmExec("", nil, "iptables-save", "-t", "filter")
		if err == nil && r.Code != 0 {
			err = fmt.Errorf("iptables-save: %s", r.Output)
		}
		if err != nil {
			return "", fmt.Errorf("reading %s's iptables: %w", n.Name, err)
		}
		return chainsDiff(r.Output, want), nil
	}
	run := dataplane.ExecRunner{NetnsPath: netnsPath(n.Netns)}
	v4, _, err := dataplane.BackendsFor(ctx, run, "")
	if err != nil {
		return "", err
	}
	out, err := run.Run(ctx, v4.Save, []string{"-t", "filter"}, nil)
	if err != nil {
		return "", fmt.Errorf("reading %s's iptables: %w", n.Name, err)
	}
	return chainsDiff(string(out), want), nil
}

// chainsDiff compares iptables-save output with want (chain -> should
// exist, be jumped to and hold exactly the expected rules, or should be
// absent) and says what differs ("" when nothing).
func chainsDiff(out string, want map[string]chainWant) string {
	declared, referenced := map[string]bool{}, map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, ":"); ok {
			declared[strings.Fields(name)[0]] = true
		}
		if !strings.HasPrefix(line, "-A ") {
			continue
		}
		for _, flag := range []string{" -j ", " -g "} {
			if i := strings.Index(line, flag); i >= 0 {
				if f := strings.Fields(line[i+4:]); len(f) > 0 {
					referenced[f[0]] = true
				}
			}
		}
	}
	hashes := chainRuleHashes(out)
	var why []string
	chains := make([]string, 0, len(want))
	for c := range want {
		chains = append(chains, c)
	}
	sort.Strings(chains)
	for _, c := range chains {
		w := want[c]
		switch {
		case w.present && !declared[c]:
			why = append(why, "no chain "+c)
		case w.present && !referenced[c]:
			why = append(why, "chain "+c+" not used yet")
		case w.present && !slices.Equal(hashes[c], w.hashes):
			why = append(why, fmt.Sprintf("chain %s holds other rules than the policy's (%d rules, want %d)", c, len(hashes[c]), len(w.hashes)))
		case !w.present && declared[c]:
			why = append(why, "chain "+c+" still there")
		}
	}
	return strings.Join(why, "; ")
}
