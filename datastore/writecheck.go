package datastore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// Checks of a write that need the rest of the datastore, which Calico's
// clientv3 runs in its per-kind clients (IPPool: no overlap with another
// pool, no change of CIDR or block size; a tiered policy: its tier exists). Every backend calls CheckWrite
// after PrepareWrite on each create and update, and VerifyCreated after a
// create succeeded, passing itself as the Client; so do wrappers that write
// without a backend (none for now). A raw write into the store (etcdctl,
// kubectl on the CRD) bypasses them: IPAM therefore never relies on them
// for address uniqueness (see ipam's block claim).

// writeChecks are the datastore-level checks of one kind.
type writeChecks struct {
	// create and update run before the write; they return field errors
	// (reported as a ValidationError) or a read failure.
	create func(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error)
	update func(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error)
	// created runs after a create: field errors undo the create.
	created func(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error)
}

var checksByKind = map[string]writeChecks{
	v3.KindIPPool:                    {create: checkPoolCreate, update: checkPoolUpdate, created: checkPoolCreated},
	v3.KindNetworkPolicy:             {create: checkTierExists},
	v3.KindGlobalNetworkPolicy:       {create: checkTierExists},
	v3.KindStagedNetworkPolicy:       {create: checkTierExists},
	v3.KindStagedGlobalNetworkPolicy: {create: checkTierExists},
}

// CheckWrite runs the datastore-level checks of a create or update (op) of
// obj, already defaulted and validated by PrepareWrite, reading through c.
func CheckWrite(ctx context.Context, c Client, op string, obj v3.Resource) error {
	ch, ok := checksByKind[v3.KindOf(obj)]
	check := ch.create
	if op == "update" {
		check = ch.update
	}
	if !ok || check == nil {
		return nil
	}
	errs, err := check(ctx, c, obj)
	return checkResult(op, obj, errs, err)
}

// VerifyCreated re-runs, after obj was created, the checks a concurrent
// create could have defeated (two overlapping pools created at once each
// see no other when checked). When they fail now, obj is deleted again
// (only if still unchanged) and the error says why. Of two racing creates
// the later one always sees the earlier, so at most one survives; both may
// be undone when each sees the other.
func VerifyCreated(ctx context.Context, c Client, obj v3.Resource) error {
	ch, ok := checksByKind[v3.KindOf(obj)]
	if !ok || ch.created == nil {
		return nil
	}
	errs, err := ch.created(ctx, c, obj)
	if err == nil && len(errs) == 0 {
		return nil
	}
	if err != nil {
		// The create did happen: report it as done rather than leave the
		// caller unsure. What a missed race could leave (two overlapping
		// pools) IPAM copes with, and calicoctl ipam check reports.
		slog.Warn("created, but could not re-check it against concurrent writes", "key", KeyOf(obj).String(), "err", err)
		return nil
	}
	_, derr := c.Delete(ctx, KeyOf(obj), DeleteOptions{ResourceVersion: obj.GetResourceVersion(), UID: string(obj.GetUID())})
	if derr != nil && !errors.Is(derr, ErrNotFound) {
		return checkResult("create", obj, nil, fmt.Errorf("created concurrently with a conflicting write (%s) and could not be undone: %w", errs.Error(), derr))
	}
	return checkResult("create", obj, errs, nil)
}

func checkResult(op string, obj v3.Resource, errs v3.ErrorList, err error) error {
	switch {
	case err != nil:
		return &OpError{Op: op, Key: KeyOf(obj), Err: err}
	case len(errs) > 0:
		return &OpError{Op: op, Key: KeyOf(obj), Err: &ValidationError{Errors: errs}}
	}
	return nil
}

func listPools(ctx context.Context, c Client) ([]*v3.IPPool, error) {
	l, err := c.List(ctx, v3.KindIPPool, ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing IP pools to check for overlaps: %w", err)
	}
	out := make([]*v3.IPPool, 0, len(l.Items))
	for _, r := range l.Items {
		if p, ok := r.(*v3.IPPool); ok {
			out = append(out, p)
		}
	}
	return out, nil
}

// checkPoolCreate refuses a pool overlapping another pool, or existing
// blocks of a different size, as Calico does.
func checkPoolCreate(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error) {
	p := obj.(*v3.IPPool)
	pools, err := listPools(ctx, c)
	if err != nil {
		return nil, err
	}
	errs := v3.IPPoolOverlapErrors(p, pools)
	bl, err := c.List(ctx, v3.KindIPAMBlock, ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing IPAM blocks to check the block size: %w", err)
	}
	cidrs := make([]string, 0, len(bl.Items))
	for _, r := range bl.Items {
		if b, ok := r.(*v3.IPAMBlock); ok {
			cidrs = append(cidrs, b.Spec.CIDR)
		}
	}
	errs.Extend(v3.IPPoolBlockSizeErrors(p, cidrs))
	return errs, nil
}

// checkPoolCreated looks for a pool created at the same time as p that
// overlaps it.
func checkPoolCreated(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error) {
	pools, err := listPools(ctx, c)
	if err != nil {
		return nil, err
	}
	return v3.IPPoolOverlapErrors(obj.(*v3.IPPool), pools), nil
}

// checkPoolUpdate refuses a change of CIDR or block size. A pool that is
// not stored (yet) is left to the backend, which reports it missing.
func checkPoolUpdate(ctx context.Context, c Client, obj v3.Resource) (v3.ErrorList, error) {
	cur, err := c.Get(ctx, KeyOf(obj))
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the stored pool: %w", err)
	}
	old, ok := cur.(*v3.IPPool)
	if !ok {
		return nil, nil
	}
	old = old.DeepCopy()
	old.Default() // stored by an older or raw writer: compare defaulted forms
	return v3.IPPoolUpdateErrors(old, obj.(*v3.IPPool)), nil
}
