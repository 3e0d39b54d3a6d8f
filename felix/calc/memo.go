package calc

import "net/netip"

// Memo remembers per-object work between ComputeWith calls. Entries not
// used by a call are dropped at its end. Not safe for concurrent use.
type Memo struct {
	entries map[any]*memoEntry
	gen     uint64
	// Which objects each matcher matched last time, for the local
	// endpoints and for all ipset members.
	locals, members *matchCache
	// The ipsets of the last computation, by ID.
	ipsets map[string]*IPSet
	// The outcome of the last pass over the endpoints.
	endpoints *endpointStage
	// The endpoints' tier lists of the last computation.
	selection *selection
}

// labelsKey names an endpoint's memoised labels.
type labelsKey struct{ key memberKey }

type memoEntry struct {
	gen uint64
	v   any
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{entries: map[any]*memoEntry{}} }

func (m *Memo) begin() { m.gen++ }

// end drops the entries the computation did not use.
func (m *Memo) end() {
	for k, e := range m.entries {
		if e.gen != m.gen {
			delete(m.entries, k)
		}
	}
}

// validationKey distinguishes an object's validation result from other
// work memoised for the same object.
type validationKey struct{ obj any }

// wepKey names a workload endpoint's memoised checks (which differ for a
// local endpoint).
type wepKey struct {
	w     any
	local bool
}

type wepInfo struct {
	problem string
	nets    []netip.Prefix
}

type policyInfo struct {
	p            *parsedPolicy // id, order and tier unset
	unrenderable []Unrenderable
}

// memoGet returns f() for key, computed at most once per object while the
// object keeps being passed in.
func memoGet[T any](m *Memo, key any, f func() T) T {
	if m == nil {
		return f()
	}
	if e, ok := m.entries[key]; ok {
		e.gen = m.gen
		return e.v.(memoValue[T]).v
	}
	v := memoValue[T]{f()}
	m.entries[key] = &memoEntry{gen: m.gen, v: v}
	return v.v
}

// memoValue boxes a value so that nil interfaces (a nil error) survive the
// round trip through any.
type memoValue[T any] struct{ v T }
