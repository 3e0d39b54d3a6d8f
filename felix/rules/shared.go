package rules

import (
	"crypto/sha256"
	"encoding/base64"

	"github.com/tabbynet/tabby/felix/calc"
)

// Shared workload chain bodies.
//
// Calico gives every workload its own cali-tw-/cali-fw- chain, even though
// the replicas of a deployment have identical ones. The kernel pays for
// that on every commit: nf_tables validates every rule reachable from the
// base chains whenever a transaction adds a rule, so the cost of changing
// one policy grows with the total rule count (measured at 1,000 policies /
// 500 local endpoints: 37k rules, ~75% of them in endpoint chains that
// repeat 100 distinct bodies). Here a workload's cali-tw-<iface> and
// cali-fw-<iface> chains keep their names and place (the dispatch chains
// go to them, as in Calico) but hold one rule, a goto to a body chain
// cali-tws-/cali-fws-<hash> named by a hash of what the body is built from
// (tiers, policies, profiles). Workloads with the same policies share the
// body; a packet takes exactly the path it would take through a private
// chain, with one goto more. Host endpoints keep private chains.

// workloadBody renders the shared body for one direction of a workload.
func (r *renderer) workloadBody(prefix string, tiers []calc.TierPolicies, profiles []string, polPrefix, profPrefix string) Chain {
	name := r.sharedName(prefix, tiers, profiles)
	return r.cachedEndpointChain(name, "", chainNormal, tiers, profiles, polPrefix, profPrefix)
}

// sharedName names the body built from tiers and profiles: prefix + 16
// characters of a hash of its content key (25 characters in all).
func (r *renderer) sharedName(prefix string, tiers []calc.TierPolicies, profiles []string) string {
	build := func() string {
		sum := sha256.Sum256([]byte(contentKey(prefix, "", chainNormal, tiers, profiles)))
		return prefix + base64.RawURLEncoding.EncodeToString(sum[:12])
	}
	if r.cache == nil {
		return build()
	}
	// By the identity of calc's lists first, as cachedEndpointChain does:
	// calc hands out the same lists while an endpoint's policies are
	// unchanged, so the content key is built only for changed ones.
	id := sharedNameKey{name: prefix, nTiers: len(tiers), nProfiles: len(profiles)}
	if len(tiers) > 0 {
		id.tiers = &tiers[0]
	}
	if len(profiles) > 0 {
		id.profiles = &profiles[0]
	}
	cur, prev := r.cache.epCur, r.cache.epPrev
	e, ok := cur[id]
	if !ok {
		e, ok = prev[id]
	}
	if !ok {
		// pinTiers/pinProfiles keep the lists alive so their addresses
		// are not reused by other lists while the entry exists.
		e = cachedChain{chain: Chain{Name: build()}, pinTiers: tiers, pinProfiles: profiles}
	}
	cur[id] = e
	return e.chain.Name
}

// sharedNameKey is endpointIdentity for body names (a separate type: both
// live in the same cache maps).
type sharedNameKey endpointIdentity

type gotoKey struct{ name, target string }

// gotoChain is a chain holding one goto to target.
func (r *renderer) gotoChain(name, target string) Chain {
	build := func() Chain { return Chain{Name: name, Rules: []Rule{{Action: "-g " + target}}} }
	if r.cache == nil {
		return build()
	}
	return r.cachedIn(r.cache.epCur, r.cache.epPrev, gotoKey{name, target}, nil, build)
}
