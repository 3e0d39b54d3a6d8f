package datastore

import (
	"context"
	"errors"
	"fmt"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// PolicyTier is the tier a policy of any of the four tiered kinds names
// (defaulted: "default" when unset); tiered is false for other kinds.
func PolicyTier(obj v3.Resource) (tier string, tiered bool) {
	switch p := obj.(type) {
	case *v3.NetworkPolicy:
		tier = p.Spec.Tier
	case *v3.GlobalNetworkPolicy:
		tier = p.Spec.Tier
	case *v3.StagedNetworkPolicy:
		tier = p.Spec.Tier
	case *v3.StagedGlobalNetworkPolicy:
		tier = p.Spec.Tier
	default:
		return "", false
	}
	if tier == "" {
		tier = v3.DefaultTierName
	}
	return tier, true
}

// checkTierExists refuses a policy whose tier does not exist, as Calico's
// clientv3 does before creating any tiered policy (it reads the tier and
// returns "resource does not exist: Tier(<name>)"). Only creates are
// checked, as in Calico. The built-in tiers count as existing: every
// component creates them at start-up and none can be deleted.
func checkTierExists(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error) {
	tier, tiered := PolicyTier(obj)
	if !tiered {
		return nil, nil
	}
	for _, t := range v3.DefaultTiers() {
		if t.Name == tier {
			return nil, nil
		}
	}
	_, err := c.Get(ctx, Key{Kind: v3.KindTier, Name: tier})
	switch {
	case errors.Is(err, ErrNotFound):
		var errs v3.ErrorList
		errs.Addf(v3.Path("spec").Child("tier"), "resource does not exist: Tier(%s): create the tier before its policies", tier)
		return errs, nil
	case err != nil:
		return nil, fmt.Errorf("reading tier %s: %w", tier, err)
	}
	return nil, nil
}

// CheckDelete runs the datastore-level checks of a delete, which Calico's
// clientv3 runs before deleting: the built-in tiers (default, kube-admin,
// kube-baseline) are never deleted ("Cannot delete default tier"), and a
// tier that still holds a policy (of any of the four tiered kinds) is not
// deleted ("Cannot delete a non-empty tier"). Backends call it first in Delete, passing themselves.
func CheckDelete(ctx context.Context, c Client, k Key) error {
	if k.Kind != v3.KindTier {
		return nil
	}
	for _, t := range v3.DefaultTiers() {
		if t.Name == k.Name {
			// The built-in tiers are protected, as in Calico.
			return &OpError{Op: "delete", Key: k, Err: fmt.Errorf("operation Delete is not supported on %s: Cannot delete %s tier", k.Name, k.Name)}
		}
	}
	for _, kind := range []string{v3.KindNetworkPolicy, v3.KindGlobalNetworkPolicy, v3.KindStagedNetworkPolicy, v3.KindStagedGlobalNetworkPolicy} {
		l, err := c.List(ctx, kind, ListOptions{})
		if err != nil {
			return &OpError{Op: "delete", Key: k, Err: fmt.Errorf("listing %s to check the tier is empty: %w", kind, err)}
		}
		for _, r := range l.Items {
			if tier, _ := PolicyTier(r); tier == k.Name {
				// Calico's wording (ErrorOperationNotSupported).
				return &OpError{Op: "delete", Key: k, Err: fmt.Errorf("operation delete is not supported on %s: Cannot delete a non-empty tier (%s is in it)", k.Name, KeyOf(r))}
			}
		}
	}
	return nil
}
