package rules

import (
	"maps"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/tabbynet/tabby/felix/calc"
)

// Renderer renders each Flush of one calc.Engine (RenderChanges, with its
// Delta) like Render, but remembers the chains it built, so that
// re-rendering after a small change rebuilds only the chains whose inputs
// changed. The Engine hands out the same endpoint list, tier lists, rule
// slices and *IPSet again while they are unchanged: the endpoint section
// is reused while the endpoint list is the same slice, an endpoint chain
// is found by the identity of its tier and profile lists (then by their
// content), a policy or profile chain by the identity of its rule slice,
// and a set's members of this version by its *IPSet. The Delta's set
// changes are handed on, and a change of set members only is rendered
// from the last Ruleset. Entries not used by a render are dropped. Use
// one Renderer per IP version; it is not safe for concurrent use. The
// output is identical to Render's (but for the set versions and changes,
// which only a Renderer gives).
type Renderer struct {
	cfg       Config
	ipVersion int

	cur, prev        map[any]cachedChain
	names, prevNames map[polNameKey]string
	// order is the position of each chain in the last sorted output, so
	// that the same set of chains is put in order without sorting.
	order map[string]int
	// sets holds, by calc ID, each ipset's members of this IP version
	// and their version (calc hands out the same *IPSet while a set is
	// unchanged); changes are the member changes of the calc.Delta being
	// rendered (RenderChanges), by set ID.
	sets, prevSets map[string]*familySet
	changes        map[string]calc.IPSetDelta
	// last is the last RenderChanges output and setIndex the position of
	// each calc set (by ID) in its IPSets, for a sets-only change.
	last     *Ruleset
	setIndex map[string]int
	// section is the last endpoint section; epCur and epPrev cache the
	// endpoint chains, swept only when the section is rebuilt.
	section       *endpointSection
	epCur, epPrev map[any]cachedChain
}

type cachedChain struct {
	chain Chain
	sets  map[string]string // ipsets the chain references: name -> calc ID
	// pin keeps the calc rules a rulesKey points into alive, so their
	// address cannot be reused by different rules while the entry exists.
	pin         []calc.Rule
	pinTiers    []calc.TierPolicies
	pinProfiles []string
}

type polNameKey struct {
	prefix string
	id     calc.PolicyID
}

type rulesKey struct {
	name  string
	first *calc.Rule
	n     int
	// logged: the chain carries NFLOG verdicts (an untracked copy of the
	// same policy chain in raw does not).
	logged bool
}

// NewRenderer returns a caching renderer for one IP version.
func NewRenderer(cfg Config, ipVersion int) *Renderer {
	return &Renderer{cfg: cfg, ipVersion: ipVersion, prev: map[any]cachedChain{}, prevNames: map[polNameKey]string{}, epPrev: map[any]cachedChain{}}
}

// RenderChanges renders res, the result of the calc.Engine Flush that
// returned delta, and says for each ipset, in the Ruleset's IPSetVersions
// and IPSetChanges, whether its members are those of this Renderer's
// previous Ruleset or which were added and removed since: a dataplane that
// holds that previous content applies the changes without comparing
// member lists. The set members of this IP version are taken from calc's
// lists without a copy while a set holds no member of the other version.
//
// A delta that changes set members only (an endpoint elsewhere came, went
// or changed) is rendered from the last Ruleset without walking chains or
// unchanged sets.
func (c *Renderer) RenderChanges(res *calc.Result, delta *calc.Delta) *Ruleset {
	if rs := c.setsOnly(res, delta); rs != nil {
		c.last = rs
		return rs
	}
	c.changes = make(map[string]calc.IPSetDelta, len(delta.IPSets))
	for _, d := range delta.IPSets {
		c.changes[d.ID] = d
	}
	rs := c.render(res)
	c.changes = nil
	c.last = rs
	return rs
}

// setsOnly renders a delta of set member changes only by updating those
// sets in a copy of the last Ruleset; nil when the delta is more than
// that (or there is no last Ruleset).
func (c *Renderer) setsOnly(res *calc.Result, delta *calc.Delta) *Ruleset {
	last := c.last
	if last == nil || len(delta.Endpoints)+len(delta.Policies)+len(delta.Profiles) > 0 {
		return nil
	}
	for _, d := range delta.IPSets {
		if _, used := c.setIndex[d.ID]; used && (d.Created || d.Deleted || c.prevSets[d.ID] == nil || res.IPSets[d.ID] == nil) {
			return nil
		}
	}
	out := *last
	out.IPSets = slices.Clone(last.IPSets)
	out.IPSetVersions = maps.Clone(last.IPSetVersions)
	out.IPSetChanges = nil
	for _, d := range delta.IPSets {
		i, used := c.setIndex[d.ID]
		if !used {
			continue // no chain of this version uses it
		}
		fs, ch := c.nextFamilySet(c.prevSets[d.ID], res.IPSets[d.ID], &d)
		c.prevSets[d.ID] = fs
		spec := &out.IPSets[i]
		spec.Members = fs.members
		out.IPSetVersions[spec.Name] = fs.version
		if ch != nil {
			if out.IPSetChanges == nil {
				out.IPSetChanges = map[string]IPSetChange{}
			}
			out.IPSetChanges[spec.Name] = *ch
		}
	}
	return &out
}

func (c *Renderer) render(res *calc.Result) *Ruleset {
	c.cur = make(map[any]cachedChain, len(c.prev))
	c.names = make(map[polNameKey]string, len(c.prevNames))
	c.sets = make(map[string]*familySet, len(c.prevSets))
	rs := render(c.cfg, res, c.ipVersion, c)
	c.prev, c.cur = c.cur, nil
	c.prevNames, c.names = c.names, nil
	c.prevSets, c.sets = c.sets, nil
	return rs
}

// sortChains sorts chains by name and drops repeated names (keeping the
// first after sorting). When the names are exactly those of the last
// render, the chains are placed at their known positions instead.
func (r *renderer) sortChains(chains []Chain) []Chain {
	if c := r.cache; c != nil && len(c.order) == len(chains) {
		out := make([]Chain, len(chains))
		filled := make([]bool, len(chains))
		ok := true
		for i := range chains {
			j, found := c.order[chains[i].Name]
			if !found || filled[j] {
				ok = false
				break
			}
			out[j], filled[j] = chains[i], true
		}
		if ok {
			return out
		}
	}
	slices.SortFunc(chains, func(a, b Chain) int { return strings.Compare(a.Name, b.Name) })
	chains = slices.CompactFunc(chains, func(a, b Chain) bool { return a.Name == b.Name })
	if c := r.cache; c != nil {
		c.order = make(map[string]int, len(chains))
		for i := range chains {
			c.order[chains[i].Name] = i
		}
	}
	return chains
}

// familySet is one calc ipset's members of a Renderer's IP version.
type familySet struct {
	set     *calc.IPSet
	members calc.MemberList
	// other counts set's members of the other IP version (while 0,
	// members is set.Members itself).
	other   int
	version uint64
}

// setVersions numbers member contents, unique across Renderers.
var setVersions atomic.Uint64

// familyMembers returns the members of set of the renderer's IP version,
// their version and, when set changed since the last render and the
// calc.Delta being rendered says how, the change.
func (r *renderer) familyMembers(set *calc.IPSet) (calc.MemberList, uint64, *IPSetChange) {
	c := r.cache
	if c == nil {
		m, _ := filterFamily(set.Members, r.v)
		return m, 0, nil
	}
	if fs, ok := c.sets[set.ID]; ok && fs.set == set {
		return fs.members, fs.version, nil
	}
	prev := c.prevSets[set.ID]
	var d *calc.IPSetDelta
	if cd, ok := c.changes[set.ID]; ok {
		d = &cd
	}
	fs, ch := c.nextFamilySet(prev, set, d)
	c.sets[set.ID] = fs
	return fs.members, fs.version, ch
}

// nextFamilySet returns the family set of set, given the one of the last
// render (prev, may be nil) and calc's change of the set since (d, may be
// nil), and the change of this family's members when it is known.
func (c *Renderer) nextFamilySet(prev *familySet, set *calc.IPSet, d *calc.IPSetDelta) (*familySet, *IPSetChange) {
	if prev != nil && prev.set == set {
		return prev, nil
	}
	v := c.ipVersion
	fs := &familySet{set: set, version: setVersions.Add(1)}
	if d != nil && prev != nil && d.From() == prev.set {
		ch := &IPSetChange{Since: prev.version}
		fs.other = prev.other
		for _, m := range d.Added {
			if memberVersion(m) == v {
				ch.Added = append(ch.Added, m)
			} else {
				fs.other++
			}
		}
		for _, m := range d.Removed {
			if memberVersion(m) == v {
				ch.Removed = append(ch.Removed, m)
			} else {
				fs.other--
			}
		}
		if fs.other == 0 {
			fs.members = set.Members
		} else {
			fs.members, _ = filterFamily(set.Members, v)
		}
		return fs, ch
	}
	fs.members, fs.other = filterFamily(set.Members, v)
	return fs, nil
}

// filterFamily returns the members of IP version v (members itself when
// all are) and how many are of the other version.
func filterFamily(members calc.MemberList, v int) (out calc.MemberList, other int) {
	all := members.Slice()
	for i, m := range all {
		if memberVersion(m) == v {
			continue
		}
		kept := slices.Clip(all[:i:i])
		other = 1
		for _, m := range all[i+1:] {
			if memberVersion(m) == v {
				kept = append(kept, m)
			} else {
				other++
			}
		}
		return calc.Members(kept...), other
	}
	return members, 0
}

func (r *renderer) policyChainName(prefix string, id calc.PolicyID) string {
	if r.cache == nil {
		return PolicyChainName(prefix, id)
	}
	k := polNameKey{prefix, id}
	if n, ok := r.cache.names[k]; ok {
		return n
	}
	n, ok := r.cache.prevNames[k]
	if !ok {
		n = PolicyChainName(prefix, id)
	}
	r.cache.names[k] = n
	return n
}

// cached returns the chain for key, building it with build (which records
// the ipsets it uses) on a miss.
func (r *renderer) cached(key any, pin []calc.Rule, build func() Chain) Chain {
	if r.cache == nil {
		return build()
	}
	return r.cachedIn(r.cache.cur, r.cache.prev, key, pin, build)
}

// cachedIn is cached over one pair of current and previous entries.
func (r *renderer) cachedIn(cur, prev map[any]cachedChain, key any, pin []calc.Rule, build func() Chain) Chain {
	e, ok := cur[key]
	if !ok {
		e, ok = prev[key]
	}
	if !ok {
		outer := r.usedSet
		r.usedSet = map[string]string{}
		e = cachedChain{chain: build(), sets: r.usedSet, pin: pin}
		r.usedSet = outer
	}
	cur[key] = e
	maps.Copy(r.usedSet, e.sets)
	return e.chain
}

func (r *renderer) cachedRulesChain(name string, rules []calc.Rule, owner *ruleOwner) Chain {
	build := func() Chain { return Chain{Name: name, Rules: r.policyRules(rules, owner)} }
	if len(rules) == 0 {
		return build()
	}
	return r.cached(rulesKey{name: name, first: &rules[0], n: len(rules), logged: owner != nil}, rules, build)
}

func (r *renderer) cachedEndpointChain(name, failsafe string, kind chainKind, tiers []calc.TierPolicies, profiles []string, polPrefix, profPrefix string) Chain {
	build := func() Chain { return r.endpointChain(name, failsafe, kind, tiers, profiles, polPrefix, profPrefix) }
	if r.cache == nil {
		return build()
	}
	// calc hands out the same tier lists while an endpoint's policies are
	// unchanged: try them by identity before building the content key.
	id := endpointIdentity{name: name, failsafe: failsafe, kind: kind, nTiers: len(tiers), nProfiles: len(profiles)}
	if len(tiers) > 0 {
		id.tiers = &tiers[0]
	}
	if len(profiles) > 0 {
		id.profiles = &profiles[0]
	}
	cur, prev := r.cache.epCur, r.cache.epPrev
	if e, ok := cur[id]; ok {
		maps.Copy(r.usedSet, e.sets)
		return e.chain
	}
	if e, ok := prev[id]; ok {
		cur[id] = e
		maps.Copy(r.usedSet, e.sets)
		return e.chain
	}
	key := contentKey(name, failsafe, kind, tiers, profiles)
	chain := r.cachedIn(cur, prev, key, nil, build)
	// Keep the lists the identity points into alive while the entry
	// exists, so that their addresses cannot be reused by other lists.
	e := cur[key]
	e.pinTiers, e.pinProfiles = tiers, profiles
	cur[id] = e
	return chain
}

// endpointIdentity names an endpoint chain by the identity of its calc
// tier and profile lists.
type endpointIdentity struct {
	name, failsafe    string
	kind              chainKind
	tiers             *calc.TierPolicies
	profiles          *string
	nTiers, nProfiles int
}

// contentKey names an endpoint chain by everything it is built from.
func contentKey(name, failsafe string, kind chainKind, tiers []calc.TierPolicies, profiles []string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(0)
	b.WriteString(failsafe)
	b.WriteByte(0)
	b.WriteByte(byte('0' + kind))
	for _, t := range tiers {
		b.WriteString("\x00t")
		b.WriteString(t.Tier)
		b.WriteByte(0)
		b.WriteString(string(t.DefaultAction))
		for _, id := range t.Policies {
			b.WriteString("\x00p")
			b.WriteString(id.Tier)
			b.WriteByte('/')
			b.WriteString(id.Namespace)
			b.WriteByte('/')
			b.WriteString(id.Name)
		}
	}
	for _, p := range profiles {
		b.WriteString("\x00r")
		b.WriteString(p)
	}
	return b.String()
}
