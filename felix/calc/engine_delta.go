package calc

import (
	"cmp"
	"maps"
	"slices"
	"strings"
)

// Delta is what changed between two Flushes of an Engine.
type Delta struct {
	// Endpoints are the local endpoints added, removed or whose Endpoint
	// (addresses, profiles, tier lists) changed, sorted.
	Endpoints []EndpointRef
	// Policies are the active policies added, removed or changed, sorted.
	Policies []PolicyID
	// Profiles are the profiles that came into or went out of use, or
	// whose rules changed, sorted.
	Profiles []string
	// IPSets are the sets created, deleted or whose members changed,
	// sorted by ID.
	IPSets []IPSetDelta
	// Problems and Unrenderable say whether those lists changed.
	Problems, Unrenderable bool
}

// EndpointRef names a local endpoint.
type EndpointRef struct {
	Kind EndpointKind
	Key  string
}

// IPSetDelta is the change of one ipset: created (Added holds all its
// members), deleted (Removed holds them), or members added and removed.
type IPSetDelta struct {
	ID               string
	Created, Deleted bool
	Added, Removed   []string
	// from is the set the changes apply to (nil when Created).
	from *IPSet
}

// From is the published set (of the previous Flush's Result) that the
// changes lead from: a consumer that derived its state from that very set
// can apply Added and Removed instead of comparing member lists. nil for
// a created set.
func (d IPSetDelta) From() *IPSet { return d.from }

// Empty reports whether nothing changed.
func (d *Delta) Empty() bool {
	return len(d.Endpoints) == 0 && len(d.Policies) == 0 && len(d.Profiles) == 0 && len(d.IPSets) == 0 &&
		!d.Problems && !d.Unrenderable
}

// deltaBuilder collects what changed until the next Flush.
type deltaBuilder struct {
	// Which parts of the Result must be rebuilt.
	endpoints, policiesMap, profilesMap, ipsetsMap, problems, unrenderable bool

	eps   map[EndpointRef]bool
	pols  map[PolicyID]bool
	profs map[string]bool
	sets  map[string]bool
	// members holds the additions and removals of the sets that were
	// published before and are now, as merged.
	members map[string]IPSetDelta
}

func (d *deltaBuilder) reset() {
	*d = deltaBuilder{eps: map[EndpointRef]bool{}, pols: map[PolicyID]bool{}, profs: map[string]bool{}, sets: map[string]bool{}, members: map[string]IPSetDelta{}}
}

func (d *deltaBuilder) endpoint(r EndpointRef) { d.eps[r] = true; d.endpoints = true }
func (d *deltaBuilder) policy(id PolicyID)     { d.pols[id] = true }
func (d *deltaBuilder) profile(name string)    { d.profs[name] = true }

// build returns the Delta; prev and next are the ipsets before and after.
func (d *deltaBuilder) build(prev, next map[string]*IPSet) *Delta {
	out := &Delta{Problems: d.problems, Unrenderable: d.unrenderable}
	out.Endpoints = slices.SortedFunc(maps.Keys(d.eps), func(a, b EndpointRef) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Key, b.Key))
	})
	out.Policies = slices.SortedFunc(maps.Keys(d.pols), func(a, b PolicyID) int { return strings.Compare(a.String(), b.String()) })
	out.Profiles = slices.Sorted(maps.Keys(d.profs))
	for _, id := range slices.Sorted(maps.Keys(d.sets)) {
		was, is := prev[id], next[id]
		switch {
		case was == is:
		case was == nil:
			out.IPSets = append(out.IPSets, IPSetDelta{ID: id, Created: true, Added: is.Members.Slice()})
		case is == nil:
			out.IPSets = append(out.IPSets, IPSetDelta{ID: id, Deleted: true, Removed: was.Members.Slice(), from: was})
		default:
			sd, ok := d.members[id]
			if !ok { // replaced by a new set of the same ID: compare
				sd = IPSetDelta{ID: id}
				sd.Added, sd.Removed = diffSorted(was.Members.Slice(), is.Members.Slice())
			}
			sd.from = was
			if len(sd.Added)+len(sd.Removed) > 0 {
				out.IPSets = append(out.IPSets, sd)
			}
		}
	}
	return out
}

// diffSorted returns the strings of b not in a and those of a not in b;
// both lists are sorted.
func diffSorted(a, b []string) (added, removed []string) {
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i] < b[j]):
			removed = append(removed, a[i])
			i++
		case i == len(a) || b[j] < a[i]:
			added = append(added, b[j])
			j++
		default:
			i++
			j++
		}
	}
	return added, removed
}
