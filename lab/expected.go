package lab

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/rules"
)

// How apply knows a node runs the policy as it is now, not only that the
// policy's chain exists (an edit keeps the chain): felix marks every rule
// it writes with a hash ("-m comment --comment cali:<hash>") that covers
// the chain's name, the previous rule's hash and the rule's text. The
// hashes of a chain are therefore an exact fingerprint of its body, read
// straight from iptables-save (no need to match iptables' own rewriting
// of the rule text). The expected fingerprint comes from felix's own pure
// code: the policy as stored, converted by felix/calc for an endpoint it
// selects, rendered by felix/rules with felix's default settings (the
// lab's nodes run with them; ipset names derive from the selectors, not
// from the members). A FelixConfiguration that changes the packet marks
// or the log prefix would make every policy chain differ: the wait then
// fails after its bound naming the chain, never returns early.

// expectedRuleHashes renders the policy's chains (those of r.chains())
// as felix does on pod p's node, and returns each chain's rule hashes.
func (l *Lab) expectedRuleHashes(ctx context.Context, r PolicyRef, p PodState) (map[string][]string, error) {
	pol, err := l.storedPolicy(ctx, r)
	if err != nil {
		return nil, err
	}
	in := calc.Input{Node: p.Node}
	in.Add(pol)
	if r.Tier != v3.DefaultTierName && r.Tier != "" {
		c, err := l.client()
		if err != nil {
			return nil, err
		}
		tier, err := c.Get(ctx, datastore.Key{Kind: v3.KindTier, Name: r.Tier})
		if err != nil {
			return nil, fmt.Errorf("policy %s: reading its tier %s: %w", r.Name, r.Tier, err)
		}
		in.Add(tier)
	}
	wep, prof, err := l.felixEndpoint(p)
	if err != nil {
		return nil, err
	}
	in.Add(wep)
	in.Add(prof)
	rs := rules.Render(rules.DefaultConfig(), calc.Compute(in), 4)
	out := map[string][]string{}
	for _, name := range r.chains() {
		for i := range rs.Chains {
			if c := &rs.Chains[i]; c.Name == name {
				hashes := []string{}
				for _, h := range c.Hashed() {
					hashes = append(hashes, h.Hash)
				}
				out[name] = hashes
			}
		}
		if _, ok := out[name]; !ok {
			return nil, fmt.Errorf("policy %s: felix's rendering for pod %s has no chain %s", r.Name, p.Key(), name)
		}
	}
	return out, nil
}

// storedPolicy is the policy as felix reads it: r.Policy when the apply
// knows it (a converted Kubernetes NetworkPolicy), else the Calico policy
// read back from the datastore.
func (l *Lab) storedPolicy(ctx context.Context, r PolicyRef) (v3.Resource, error) {
	pol := r.Policy
	if pol == nil {
		c, err := l.client()
		if err != nil {
			return nil, err
		}
		key := datastore.Key{Kind: v3.KindGlobalNetworkPolicy, Name: r.Name}
		if r.Namespace != "" {
			key = datastore.Key{Kind: v3.KindNetworkPolicy, Namespace: r.Namespace, Name: r.Name}
		}
		if pol, err = c.Get(ctx, key); err != nil {
			return nil, fmt.Errorf("reading %s back: %w", key, err)
		}
	}
	pol = pol.DeepCopyObject().(v3.Resource)
	pol.Default()
	return pol, nil
}

// felixEndpoint is pod p's WorkloadEndpoint and its namespace's profile
// with the labels felix gives them (see selects).
func (l *Lab) felixEndpoint(p PodState) (*v3.WorkloadEndpoint, *v3.Profile, error) {
	labels, nsLabels := l.felixLabels(p)
	name, err := kdd.WorkloadEndpointName(p.Node, p.Name, "eth0")
	if err != nil {
		return nil, nil, err
	}
	prof, err := kdd.NamespaceToProfile(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: p.Namespace, Labels: nsLabels}})
	if err != nil {
		return nil, nil, err
	}
	wep := &v3.WorkloadEndpoint{
		TypeMeta:   metav1.TypeMeta{Kind: v3.KindWorkloadEndpoint, APIVersion: v3.GroupVersion},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: p.Namespace, Labels: labels},
		Spec: v3.WorkloadEndpointSpec{Orchestrator: "k8s", Node: p.Node, Pod: p.Name, Endpoint: "eth0",
			InterfaceName: "calilab0", Profiles: []string{prof.Name}},
	}
	if p.IP != "" {
		wep.Spec.IPNetworks = []string{p.IP + "/32"}
	}
	return wep, prof, nil
}

// felixLabels are pod p's labels as felix sees them on its endpoint
// (the pod's own plus Calico's projectcalico.org ones) and its
// namespace's labels (the model's; the profile adds pcns. and the name).
func (l *Lab) felixLabels(p PodState) (labels, nsLabels map[string]string) {
	labels = map[string]string{"projectcalico.org/namespace": p.Namespace, "projectcalico.org/orchestrator": "k8s"}
	for _, mp := range l.State.Model.Pods {
		if mp.Key() == p.Key() {
			for k, v := range mp.Labels {
				labels[k] = v
			}
		}
	}
	nsLabels = map[string]string{}
	for _, ns := range l.State.Model.Namespaces {
		if ns.Name == p.Namespace {
			for k, v := range ns.Labels {
				nsLabels[k] = v
			}
		}
	}
	return labels, nsLabels
}

var ruleHash = regexp.MustCompile(`--comment "?cali:([A-Za-z0-9_-]+)"?`)

// chainRuleHashes reads each chain's rule hashes, in order, from
// iptables-save output.
func chainRuleHashes(save string) map[string][]string {
	out := map[string][]string{}
	for _, line := range strings.Split(save, "\n") {
		rest, ok := strings.CutPrefix(line, "-A ")
		if !ok {
			continue
		}
		chain, _, _ := strings.Cut(rest, " ")
		if m := ruleHash.FindStringSubmatch(rest); m != nil {
			out[chain] = append(out[chain], m[1])
		}
	}
	return out
}
