package datastore

import (
	v3 "github.com/tabbynet/tabby/api/v3"
)

// PrepareWrite copies r, applies defaults and validates it (with Calico's
// write-time rules, v3.WriteRules), refusing also what Tabby cannot
// enforce (v3.Unsupported). Backends call it first on every create and
// update, so an invalid object never reaches the store and the caller's
// object is never modified.
func PrepareWrite(op string, r v3.Resource) (v3.Resource, error) {
	kind := v3.KindOf(r)
	info, ok := v3.LookupKind(kind)
	if !ok {
		return nil, &OpError{Op: op, Key: KeyOf(r), Err: v3.ErrUnknownKind}
	}
	c := r.DeepCopyObject().(v3.Resource)
	c.GetObjectKind().SetGroupVersionKind(info.New().GetObjectKind().GroupVersionKind())
	c.Default()
	errs := c.Validate()
	errs.Extend(v3.WriteRules(c))
	errs.Extend(v3.Unsupported(c))
	if len(errs) > 0 {
		return nil, &OpError{Op: op, Key: KeyOf(r), Err: &ValidationError{Errors: errs}}
	}
	return c, nil
}
