package commands

import (
	"context"
	"errors"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/datastore/kdd"
	"github.com/tabbynet/tabby/felix/calc"
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

// stagedID names the enforced policy a staged policy stands for: a
// StagedNetworkPolicy for the NetworkPolicy of its name, a staged
// Kubernetes policy for knp.default.<name>.
type stagedPolicy struct {
	id     calc.PolicyID
	kind   string // the staged kind
	action v3.StagedAction
	// policy is the policy as it would be enforced (nil for Delete).
	policy v3.Resource
}

// stagedPolicies converts the snapshot's staged policies into the
// policies they would enforce. Learn and Ignore stage nothing.
func (s *policySnapshot) stagedPolicies() ([]stagedPolicy, error) {
	var out []stagedPolicy
	for _, r := range s.staged {
		sp, err := convertStaged(r)
		if err != nil {
			return nil, err
		}
		if sp.action == v3.StagedActionSet || sp.action == v3.StagedActionDelete {
			out = append(out, sp)
		}
	}
	return out, nil
}

func convertStaged(r v3.Resource) (stagedPolicy, error) {
	meta := func(o metav1.ObjectMeta) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, Labels: o.Labels, ResourceVersion: "staged"}
	}
	tierOf := func(t string) string {
		if t == "" {
			return v3.DefaultTierName
		}
		return t
	}
	switch r := r.(type) {
	case *v3.StagedNetworkPolicy:
		sp := r.Spec
		np := &v3.NetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindNetworkPolicy, APIVersion: v3.GroupVersion}, ObjectMeta: meta(r.ObjectMeta),
			Spec: v3.NetworkPolicySpec{Tier: sp.Tier, Order: sp.Order, Ingress: sp.Ingress, Egress: sp.Egress, Selector: sp.Selector,
				Types: sp.Types, ServiceAccountSelector: sp.ServiceAccountSelector, PerformanceHints: sp.PerformanceHints}}
		np.Default()
		return stagedResult(calc.PolicyID{Tier: tierOf(sp.Tier), Namespace: r.Namespace, Name: r.Name}, v3.KindStagedNetworkPolicy, sp.StagedAction, np), nil
	case *v3.StagedGlobalNetworkPolicy:
		sp := r.Spec
		gnp := &v3.GlobalNetworkPolicy{TypeMeta: metav1.TypeMeta{Kind: v3.KindGlobalNetworkPolicy, APIVersion: v3.GroupVersion}, ObjectMeta: meta(r.ObjectMeta),
			Spec: v3.GlobalNetworkPolicySpec{Tier: sp.Tier, Order: sp.Order, Ingress: sp.Ingress, Egress: sp.Egress, Selector: sp.Selector,
				Types: sp.Types, DoNotTrack: sp.DoNotTrack, PreDNAT: sp.PreDNAT, ApplyOnForward: sp.ApplyOnForward,
				ServiceAccountSelector: sp.ServiceAccountSelector, NamespaceSelector: sp.NamespaceSelector, PerformanceHints: sp.PerformanceHints}}
		gnp.Default()
		return stagedResult(calc.PolicyID{Tier: tierOf(sp.Tier), Name: r.Name}, v3.KindStagedGlobalNetworkPolicy, sp.StagedAction, gnp), nil
	case *v3.StagedKubernetesNetworkPolicy:
		sp := r.Spec
		k8s := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: sp.PodSelector, Ingress: sp.Ingress, Egress: sp.Egress, PolicyTypes: sp.PolicyTypes}}
		np, err := kdd.K8sNetworkPolicyToCalico(k8s)
		if err != nil && np == nil {
			return stagedPolicy{}, fmt.Errorf("StagedKubernetesNetworkPolicy %s/%s: %w", r.Namespace, r.Name, err)
		}
		np.ResourceVersion = "staged"
		np.Default()
		return stagedResult(calc.PolicyID{Tier: v3.DefaultTierName, Namespace: r.Namespace, Name: np.Name}, v3.KindStagedKubernetesNetworkPolicy, sp.StagedAction, np), nil
	}
	return stagedPolicy{}, fmt.Errorf("%T is not a staged policy", r)
}

func stagedResult(id calc.PolicyID, kind string, action v3.StagedAction, pol v3.Resource) stagedPolicy {
	if action == "" {
		action = v3.StagedActionSet
	}
	sp := stagedPolicy{id: id, kind: kind, action: action}
	if action == v3.StagedActionSet {
		sp.policy = pol
	}
	return sp
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

// pendingObjects is the snapshot with its staged policies as if enforced:
// a Set replaces (or adds) the policy it stands for, a Delete removes it.
func (s *policySnapshot) pendingObjects(staged []stagedPolicy) []any {
	replaced := map[calc.PolicyID]bool{}
	for _, sp := range staged {
		replaced[sp.id] = true
	}
	var out []any
	for _, o := range s.objs {
		if id, ok := policyID(o.(v3.Resource)); ok && replaced[id] {
			continue
		}
		out = append(out, o)
	}
	for _, sp := range staged {
		if sp.policy != nil {
			out = append(out, sp.policy)
		}
	}
	return out
}
