// Package calc is felix's pure calculation: Calico resources in, the desired
// policy dataplane of one node out. Compute takes WorkloadEndpoints,
// HostEndpoints, (Global)NetworkPolicies, Tiers, Profiles and
// (Global)NetworkSets (and, where felix follows Kubernetes Services, their
// EndpointSlices: Input.FollowsServices) plus the local node name and
// returns, for every local
// endpoint and direction, the ordered tiers and policies that apply (tier
// order, then policy order, then name; a nil order sorts last), the profiles
// that apply, the rules of each active policy and profile with every
// selector, named port, multi-CIDR and services match resolved to an ipset
// ID, and the members of those ipsets over all endpoints and network sets in
// the cluster (a services match: its Service's endpoints, services.go).
// A host endpoint's policies are split as Calico splits them: normal
// (Ingress/Egress), applyOnForward (also ForwardIngress/ForwardEgress),
// preDNAT (PreDNATIngress) and doNotTrack (UntrackedIngress/
// UntrackedEgress; none for an all-interfaces "*" host endpoint); a
// workload endpoint takes normal and applyOnForward policies only.
//
// The package does no I/O and reads no clock; the same resources given in any
// order give an identical Result. Bad input (an object that fails
// validation, a policy naming a missing tier, an endpoint naming a missing
// profile, a duplicate) is reported in Result.Problems and skipped; it never
// stops the rest of the calculation.
//
// # Rules that cannot be rendered (never fail open)
//
// A rule felix cannot render as written (an HTTP match or, where felix does
// not follow Services, a services match, which Calico's validation
// accepts, or anything validation missed) never makes
// its policy disappear. An Allow rule is dropped (it allows less); a Deny
// keeps the matches that can be rendered (it denies more); a Pass, a Log or
// an unknown action, whose effect cannot be bounded that way, becomes a
// Deny of every packet reaching it. A policy whose own selector cannot be
// parsed selects every endpoint of its namespace scope and denies their
// traffic in its directions. Each case is listed in Result.Unrenderable
// with its Handling and Reason.
//
// # One path: the Engine, with Compute as its oracle
//
// felix runs the Engine: resources go in one at a time (Upsert, Delete)
// and Flush returns the Result and a Delta (the local endpoints, active
// policies, profiles and ipset members that changed), which the renderer
// (rules.Renderer.RenderChanges) takes as it is. Compute is the plain
// from-scratch calculation of the same Result, kept as the reference the
// Engine is tested against (felix never runs it; tests and the lab's
// expectations do). Both load every
// object through the same pure per-object loaders (load.go: a tier, a
// profile, an endpoint or network set in, what the calculation keeps of
// it and its problems out; policy.go: a policy in, the parsed policy,
// its problems and the rules it cannot render out, then placed in its
// tier), so bad input, label inheritance and the fail-closed conversion
// cannot differ between them; only what is derived from the loaded
// objects (selection, set membership) is computed twice, once
// incrementally and once plainly.
//
// The Engine's cost is that of what an update touches: a label index
// (labelindex.go) evaluates an endpoint or network set only against the
// selectors of its namespace and the global ones and turns "now matches"
// / "no longer matches" into ipset member additions and removals; a
// local endpoint's policy lists are rebuilt only when its labels or
// profiles, or the policies selecting it, change; a policy is evaluated
// against the local endpoints only; a profile change re-derives the items
// inheriting its labels, a tier change the policies of that tier.
// Compute stays the reference: TestEngineEquivalence checks the Engine
// against it after every step of random update sequences.
//
// ComputeFocused is Compute over the part of the input one flow needs
// (a few endpoints and the items holding the flow's addresses), for
// `calicoctl policy trace`: the same loaders and selection, so the
// trace shows what felix computes.
//
// # Label model
//
// An endpoint's labels are its own labels over the labelsToApply of its
// profiles (earlier profiles win over later ones, the endpoint's own labels
// win over all), plus projectcalico.org/namespace = its namespace. This is
// how Calico's kns.<namespace> and ksa.<namespace>.<sa> profiles carry
// namespace and service-account labels, prefixed "pcns." and "pcsa.":
// a namespaceSelector "team == 'a'" is evaluated as "pcns.team == 'a'" over
// the endpoint's labels, a serviceAccounts selector likewise over "pcsa.",
// and serviceAccounts.names over "pcsa.projectcalico.org/name". Where the
// profiles do not supply them, pcns.projectcalico.org/name (the namespace)
// and pcsa.projectcalico.org/name (spec.serviceAccountName) are filled in so
// that namespace and service-account names match without profiles.
// Namespaced NetworkSets inherit their kns.<namespace> profile's labels too.
//
// # Scoping (as Calico)
//
// A NetworkPolicy's selector is AND'ed with projectcalico.org/namespace ==
// its namespace. In its rules, a selector, notSelector or serviceAccounts
// match is scoped to the policy's namespace unless the rule has a
// namespaceSelector, which replaces the namespace scope. GlobalNetworkPolicy
// and Profile rules are unscoped.
package calc
