package calctest

import (
	"fmt"
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/felix/calc"
)

// Load returns an Engine for node holding objs, fed as felix's daemon
// feeds a snapshot: everything else before the workload endpoints. It is
// not flushed yet.
func Load(node string, objs []any) *calc.Engine {
	e := calc.NewEngine(node)
	for _, weps := range []bool{false, true} {
		for _, o := range objs {
			if _, ok := o.(*v3.WorkloadEndpoint); ok == weps && !e.Upsert(o) {
				panic(fmt.Sprintf("calctest.Load: unsupported %T", o))
			}
		}
	}
	return e
}

// Sync feeds an Engine holding the objects before the changes that make
// it hold after, as a datastore watch reports them: an Upsert for each
// object of after that is not in before (objects are compared by
// identity: a changed object is a new one), a Delete for each key of
// before no longer in after.
func Sync(e *calc.Engine, before, after []any) {
	old, now := byKey(before), byKey(after)
	for _, k := range slices.Sorted(maps.Keys(now)) {
		if o := now[k]; old[k] != o {
			e.Upsert(o)
		}
		delete(old, k)
	}
	for _, k := range slices.Sorted(maps.Keys(old)) {
		e.Delete(old[k])
	}
}

// byKey indexes objs by kind, namespace and name; a key listed twice is a
// mistake in the test.
func byKey(objs []any) map[string]any {
	out := make(map[string]any, len(objs))
	for _, o := range objs {
		k := keyOf(o)
		if _, dup := out[k]; dup {
			panic("calctest: " + k + " listed twice")
		}
		out[k] = o
	}
	return out
}

// With returns objs with each of more in place of the object of its key,
// or added when there is none (objs itself is not modified).
func With(objs []any, more ...any) []any {
	out := slices.Clone(objs)
	for _, o := range more {
		k := keyOf(o)
		if i := slices.IndexFunc(out, func(x any) bool { return keyOf(x) == k }); i >= 0 {
			out[i] = o
		} else {
			out = append(out, o)
		}
	}
	return out
}

// keyOf names o by kind, namespace and name.
func keyOf(o any) string {
	m := o.(metav1.Object)
	return fmt.Sprintf("%T/%s/%s", o, m.GetNamespace(), m.GetName())
}
