package commands

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/calc"
	"github.com/tabbynet/tabby/felix/infra"
	"github.com/tabbynet/tabby/felix/staged"
)

// policySnapshot is what `policy trace|show|chain` read: the resources
// felix's policy calculation takes (as felix lists them), the staged
// policies, and the felix setting that decides workload-to-host traffic.
type policySnapshot struct {
	objs   []any
	staged []v3.Resource
	// endpointToHost is FelixConfiguration defaultEndpointToHostAction
	// (Drop, Accept or Return; Drop when unset).
	endpointToHost string
	// cluster is the Nodes and IP pools as felix reads them: which
	// interface a forwarded flow crosses (nil: not known).
	cluster *infra.Cluster
}

// policyKinds are the kinds of felix's policy calculation (felix's
// daemon.Kinds less the ones only rules and routes read).
var policyKinds = []string{
	v3.KindWorkloadEndpoint, v3.KindHostEndpoint, v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy,
	v3.KindTier, v3.KindProfile, v3.KindNetworkSet, v3.KindGlobalNetworkSet,
}

// stagedKinds are the staged policy kinds, shown as pending verdicts.
var stagedKinds = []string{
	v3.KindStagedNetworkPolicy, v3.KindStagedGlobalNetworkPolicy, v3.KindStagedKubernetesNetworkPolicy,
}

// loadPolicySnapshot lists everything a trace reads from c. A kind with
// undecodable records fails the load: a trace over part of the policy
// could allow what the cluster denies.
func loadPolicySnapshot(ctx context.Context, c datastore.Client) (*policySnapshot, error) {
	s := &policySnapshot{endpointToHost: "Drop"}
	var err error
	for _, kind := range append(append([]string{}, policyKinds...), stagedKinds...) {
		l, err := c.List(ctx, kind, datastore.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, err)
		}
		if err := l.Complete(); err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, err)
		}
		for _, r := range l.Items {
			s.add(r)
		}
	}
	if s.cluster, err = loadCluster(ctx, c); err != nil {
		return nil, err
	}
	fc, err := c.Get(ctx, datastore.Key{Kind: v3.KindFelixConfiguration, Name: "default"})
	switch {
	case err == nil:
		if a := fc.(*v3.FelixConfiguration).Spec.DefaultEndpointToHostAction; a != "" {
			s.endpointToHost = a
		}
	case !errors.Is(err, datastore.ErrNotFound):
		return nil, fmt.Errorf("reading FelixConfiguration default: %w", err)
	}
	return s, nil
}

// loadCluster reads the Nodes and IP pools (felix/infra, as felix's
// routes read them).
func loadCluster(ctx context.Context, c datastore.Client) (*infra.Cluster, error) {
	var pools []*v3.IPPool
	var nodes []*v3.Node
	for _, kind := range []string{v3.KindIPPool, v3.KindNode} {
		l, err := c.List(ctx, kind, datastore.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("listing %s: %w", kind, err)
		}
		for _, r := range l.Items {
			switch r := r.(type) {
			case *v3.IPPool:
				pools = append(pools, r)
			case *v3.Node:
				nodes = append(nodes, r)
			}
		}
	}
	return infra.Derive(pools, nodes), nil
}

// add files one resource: staged policies apart, the rest as felix's
// calculation takes them.
func (s *policySnapshot) add(r v3.Resource) {
	switch r.(type) {
	case *v3.StagedNetworkPolicy, *v3.StagedGlobalNetworkPolicy, *v3.StagedKubernetesNetworkPolicy:
		s.staged = append(s.staged, r)
	default:
		var in calc.Input
		if in.Add(r) {
			s.objs = append(s.objs, r)
		}
	}
}

// apply puts the file's resources in the snapshot as if applied: each
// replaces the stored resource of its key, or is added.
func (s *policySnapshot) apply(rs []v3.Resource) error {
	for _, r := range rs {
		k := datastore.KeyOf(r)
		var in calc.Input
		staged := false
		switch r.(type) {
		case *v3.StagedNetworkPolicy, *v3.StagedGlobalNetworkPolicy, *v3.StagedKubernetesNetworkPolicy:
			staged = true
		default:
			if !in.Add(r) {
				return fmt.Errorf("%s: a trace applies policy resources only (kinds %s, %s)", k,
					strings.Join(policyKinds, ", "), strings.Join(stagedKinds, ", "))
			}
		}
		s.objs = removeKey(s.objs, k)
		s.staged = removeResourceKey(s.staged, k)
		if staged {
			s.staged = append(s.staged, r)
		} else {
			s.objs = append(s.objs, r)
		}
	}
	return nil
}

func removeKey(objs []any, k datastore.Key) []any {
	out := objs[:0]
	for _, o := range objs {
		if datastore.KeyOf(o.(v3.Resource)) != k {
			out = append(out, o)
		}
	}
	return out
}

func removeResourceKey(rs []v3.Resource, k datastore.Key) []v3.Resource {
	out := rs[:0]
	for _, r := range rs {
		if datastore.KeyOf(r) != k {
			out = append(out, r)
		}
	}
	return out
}

// stagedPolicies converts the snapshot's staged policies into what
// felix's calculation evaluates as pending (felix/staged, as the flow
// log collector does): each a policy of its own in its tier, a Delete
// staging nothing (Calico's pending verdicts).
func (s *policySnapshot) stagedPolicies() ([]*calc.StagedPolicy, error) {
	var out []*calc.StagedPolicy
	for _, r := range s.staged {
		sp, err := staged.Convert(r)
		if err != nil {
			return nil, err
		}
		if sp != nil {
			out = append(out, sp)
		}
	}
	return out, nil
}

// policyID is the calculation's name of an enforced policy object.
func policyID(r v3.Resource) (calc.PolicyID, bool) {
	tier := func(t string) string {
		if t == "" {
			return v3.DefaultTierName
		}
		return t
	}
	switch p := r.(type) {
	case *v3.NetworkPolicy:
		return calc.PolicyID{Tier: tier(p.Spec.Tier), Namespace: p.Namespace, Name: p.Name}, true
	case *v3.GlobalNetworkPolicy:
		return calc.PolicyID{Tier: tier(p.Spec.Tier), Name: p.Name}, true
	}
	return calc.PolicyID{}, false
}

// stagedID is the calculation's name of a staged policy.
func stagedID(sp *calc.StagedPolicy) calc.PolicyID {
	id, _ := policyID(sp.Policy)
	id.Name = calc.StagedName(id.Name)
	return id
}

// pendingObjects is the snapshot with its staged policies evaluated as
// if enforced, next to the policies in force.
func (s *policySnapshot) pendingObjects(staged []*calc.StagedPolicy) []any {
	out := slices.Clone(s.objs)
	for _, sp := range staged {
		out = append(out, sp)
	}
	return out
}
