package commands

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	v3 "github.com/tabbynet/tabby/api/v3"
)

// poolOverlaps checks the IPPools among rs (each already defaulted and
// valid on its own) against each other, as the datastore checks a new pool
// against the stored ones: each pool that overlaps an earlier pool of the
// input gets Calico's message naming both, keyed by its index in rs. Pools
// of the same name are one pool given twice, not an overlap.
func poolOverlaps(rs []v3.Resource) map[int]v3.ErrorList {
	var seen []*v3.IPPool
	out := map[int]v3.ErrorList{}
	for i, r := range rs {
		p, ok := r.(*v3.IPPool)
		if !ok {
			continue
		}
		if errs := v3.IPPoolOverlapErrors(p, seen); len(errs) > 0 {
			out[i] = errs
		}
		seen = append(seen, p)
	}
	return out
}

// sortedByKey yields m's entries in key order.
func sortedByKey(m map[int]v3.ErrorList) func(yield func(int, v3.ErrorList) bool) {
	return func(yield func(int, v3.ErrorList) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

// inputPoolOverlaps refuses input whose IPPools overlap each other.
func inputPoolOverlaps(ins []inputResource) error {
	rs := make([]v3.Resource, len(ins))
	for i, in := range ins {
		rs[i] = in.r
	}
	var problems []string
	for i, errs := range sortedByKey(poolOverlaps(rs)) {
		for _, fe := range errs {
			problems = append(problems, fmt.Sprintf("%s: %s", ins[i].where(), fe.Error()))
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("nothing was changed; fix these first:\n  %s", strings.Join(problems, "\n  "))
}
