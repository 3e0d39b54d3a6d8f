package rules

import (
	"maps"
	"strings"

	"github.com/tabbynet/tabby/felix/calc"
)

// Renderer renders like Render but remembers the chains it built, so that
// re-rendering after a small change rebuilds only the chains whose inputs
// changed: endpoint chains are recognised by their tiers, policies and
// profiles, policy and profile chains by the identity of their calc rule
// slices (stable across calc.ComputeWith calls that share a Memo).
// Entries not used by a render are dropped. Use one Renderer per IP
// version; it is not safe for concurrent use. The output is identical to
// Render's.
type Renderer struct {
	cfg       Config
	ipVersion int

	cur, prev        map[any]cachedChain
	names, prevNames map[polNameKey]string
}

type cachedChain struct {
	chain Chain
	sets  map[string]string // ipsets the chain references: name -> calc ID
	// pin keeps the calc rules a rulesKey points into alive, so their
	// address cannot be reused by different rules while the entry exists.
	pin []calc.Rule
}

type polNameKey struct {
	prefix string
	id     calc.PolicyID
}

type rulesKey struct {
	name  string
	first *calc.Rule
	n     int
}

// NewRenderer returns a caching renderer for one IP version.
func NewRenderer(cfg Config, ipVersion int) *Renderer {
	return &Renderer{cfg: cfg, ipVersion: ipVersion, prev: map[any]cachedChain{}, prevNames: map[polNameKey]string{}}
}

// Render renders res (see the package-level Render).
func (c *Renderer) Render(res *calc.Result) *Ruleset {
	c.cur = make(map[any]cachedChain, len(c.prev))
	c.names = make(map[polNameKey]string, len(c.prevNames))
	rs := render(c.cfg, res, c.ipVersion, c)
	c.prev, c.cur = c.cur, nil
	c.prevNames, c.names = c.names, nil
	return rs
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
	e, ok := r.cache.cur[key]
	if !ok {
		e, ok = r.cache.prev[key]
	}
	if !ok {
		outer := r.usedSet
		r.usedSet = map[string]string{}
		e = cachedChain{chain: build(), sets: r.usedSet, pin: pin}
		r.usedSet = outer
	}
	r.cache.cur[key] = e
	maps.Copy(r.usedSet, e.sets)
	return e.chain
}

func (r *renderer) cachedRulesChain(name string, rules []calc.Rule) Chain {
	build := func() Chain { return Chain{Name: name, Rules: r.policyRules(rules)} }
	if len(rules) == 0 {
		return build()
	}
	return r.cached(rulesKey{name: name, first: &rules[0], n: len(rules)}, rules, build)
}

func (r *renderer) cachedEndpointChain(name, failsafe string, tiers []calc.TierPolicies, profiles []string, polPrefix, profPrefix string) Chain {
	build := func() Chain { return r.endpointChain(name, failsafe, tiers, profiles, polPrefix, profPrefix) }
	if r.cache == nil {
		return build()
	}
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte(0)
	b.WriteString(failsafe)
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
	return r.cached(b.String(), nil, build)
}
