package v3

import "github.com/tabbynet/tabby/api/numorstring"

// netFilterRule is the IP-version-independent view of a BGP filter rule
// that validation works on.
// +kubebuilder:object:generate=false
type netFilterRule struct {
	version              int // 4 or 6
	cidr                 string
	hasPrefixLength      bool
	prefixMin, prefixMax *int32
	source               BGPFilterMatchSource
	iface                string
	matchOperator        BGPFilterMatchOperator
	peerType             BGPFilterPeerType
	communities          *BGPFilterCommunityMatch
	priority             *int
	action               BGPFilterAction
	operations           []BGPFilterOperation
	asPathPrefix         []numorstring.ASNumber
	maxPrefixLen         int32
}

func (r *BGPFilterRuleV4) rule() netFilterRule {
	fr := netFilterRule{
		version: 4, cidr: r.CIDR, source: r.Source, iface: r.Interface,
		matchOperator: r.MatchOperator, peerType: r.PeerType, communities: r.Communities,
		priority: r.Priority, action: r.Action, operations: r.Operations,
		asPathPrefix: r.ASPathPrefix, maxPrefixLen: 32,
	}
	if r.PrefixLength != nil {
		fr.hasPrefixLength, fr.prefixMin, fr.prefixMax = true, r.PrefixLength.Min, r.PrefixLength.Max
	}
	return fr
}

func (r *BGPFilterRuleV6) rule() netFilterRule {
	fr := netFilterRule{
		version: 6, cidr: r.CIDR, source: r.Source, iface: r.Interface,
		matchOperator: r.MatchOperator, peerType: r.PeerType, communities: r.Communities,
		priority: r.Priority, action: r.Action, operations: r.Operations,
		asPathPrefix: r.ASPathPrefix, maxPrefixLen: 128,
	}
	if r.PrefixLength != nil {
		fr.hasPrefixLength, fr.prefixMin, fr.prefixMax = true, r.PrefixLength.Min, r.PrefixLength.Max
	}
	return fr
}

// validate checks one rule as Calico's validator and CRD rules do. isImport
// says whether the rule is in an import list.
func (r netFilterRule) validate(p Path, isImport bool) ErrorList {
	var errs ErrorList

	if r.cidr != "" {
		netStrictNet(p.Child("cidr"), r.cidr, r.version, &errs)
	}
	switch {
	case r.cidr != "" && r.matchOperator == "":
		errs.Add(p.Child("matchOperator"), "is required when cidr is set: use Equal, NotEqual, In or NotIn")
	case r.cidr == "" && r.matchOperator != "":
		errs.Add(p.Child("cidr"), "is required when matchOperator is set")
	}
	oneOf(p.Child("matchOperator"), string(r.matchOperator), &errs,
		string(MatchOperatorEqual), string(MatchOperatorNotEqual), string(MatchOperatorIn), string(MatchOperatorNotIn))

	if r.hasPrefixLength {
		pl := p.Child("prefixLength")
		if r.cidr == "" {
			errs.Add(pl, "needs cidr: prefix lengths are matched within a CIDR")
		}
		for _, b := range []struct {
			name string
			v    *int32
		}{{"min", r.prefixMin}, {"max", r.prefixMax}} {
			if b.v != nil && (*b.v < 0 || *b.v > r.maxPrefixLen) {
				errs.Addf(pl.Child(b.name), "%d is outside 0-%d for IPv%d", *b.v, r.maxPrefixLen, r.version)
			}
		}
		if r.prefixMin != nil && r.prefixMax != nil && *r.prefixMin > *r.prefixMax {
			errs.Addf(pl, "min %d is greater than max %d", *r.prefixMin, *r.prefixMax)
		}
	}

	if isImport && r.source != "" {
		errs.Add(p.Child("source"), "does not apply to import rules: every imported route comes from a peer")
	}
	oneOf(p.Child("source"), string(r.source), &errs, string(BGPFilterSourceRemotePeers))
	if r.iface != "" && r.iface != "*" && !netCheckIfaceName(r.iface) {
		errs.Addf(p.Child("interface"), "%q is not an interface name or glob (1-15 of a-z A-Z 0-9 _ . - *)", r.iface)
	}
	oneOf(p.Child("peerType"), string(r.peerType), &errs, string(BGPFilterPeerTypeEBGP), string(BGPFilterPeerTypeIBGP))

	if c := r.communities; c != nil {
		cp := p.Child("communities").Child("values")
		if len(c.Values) != 1 {
			errs.Addf(cp, "has %d values; exactly one community value is supported", len(c.Values))
		}
		for i, v := range c.Values {
			if err := netCheckCommunity(string(v)); err != nil {
				errs.Add(cp.Index(i), err.Error())
			}
		}
	}
	if r.priority != nil {
		netCheckRange(p.Child("priority"), int64(*r.priority), 1, 2147483646, &errs)
	}

	if r.action == "" {
		errs.Add(p.Child("action"), "is required: use Accept or Reject")
	}
	oneOf(p.Child("action"), string(r.action), &errs, string(BGPFilterActionAccept), string(BGPFilterActionReject))

	ops := p.Child("operations")
	if len(r.operations) > 10 {
		errs.Addf(ops, "has %d operations; at most 10 are allowed", len(r.operations))
	}
	if len(r.operations) > 0 && r.action != BGPFilterActionAccept {
		errs.Addf(ops, "operations may only be used with action Accept (got %q)", r.action)
	}
	for i, op := range r.operations {
		errs.Extend(op.validate(ops.Index(i)))
	}
	return errs
}

// validate checks one route operation: exactly one kind, well-formed.
func (op *BGPFilterOperation) validate(p Path) ErrorList {
	var errs ErrorList
	set := 0
	if op.AddCommunity != nil {
		set++
		if err := netCheckCommunity(string(op.AddCommunity.Value)); err != nil {
			errs.Add(p.Child("addCommunity").Child("value"), err.Error())
		}
	}
	if op.PrependASPath != nil {
		set++
		if n := len(op.PrependASPath.Prefix); n < 1 || n > 10 {
			errs.Addf(p.Child("prependASPath").Child("prefix"), "has %d AS numbers; give 1-10", n)
		}
	}
	if op.SetPriority != nil {
		set++
		netCheckRange(p.Child("setPriority").Child("value"), int64(op.SetPriority.Value), 1, 2147483646, &errs)
	}
	if set != 1 {
		errs.Addf(p, "sets %d operations; exactly one of addCommunity, prependASPath or setPriority must be set", set)
	}
	return errs
}
