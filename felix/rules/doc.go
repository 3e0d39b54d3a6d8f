// Package rules renders felix's desired model (calc.Result) into iptables
// chains for the filter, mangle and raw tables and ipset specs, for one IP
// version at a time. It is pure: no exec, no kernel. The text it produces is what the
// dataplane drivers feed to iptables-restore and ipset restore, and it is
// golden-tested in testdata/.
//
// # Layout (Calico's)
//
// The base chains INPUT, FORWARD and OUTPUT each get one jump, inserted at
// the top, to cali-INPUT, cali-FORWARD and cali-OUTPUT. cali-FORWARD clears
// felix's mark bits and sends packets from a workload interface (cali+) to
// cali-from-wl-dispatch and packets to one to cali-to-wl-dispatch; the
// dispatch chains go to the per-endpoint chains cali-fw-<iface> (the
// workload's egress) and cali-tw-<iface> (its ingress) by interface name,
// dropping packets of unknown cali interfaces. A packet a workload's
// policy accepted returns with the accept mark and is accepted at the end
// of cali-FORWARD. cali-INPUT sends workload-to-host packets through the
// same egress policy (cali-wl-to-host) and then applies the configured
// endpoint-to-host action; cali-OUTPUT lets the host talk to its
// workloads.
//
// Host endpoints get cali-fh-<iface> (ingress: packets from the
// interface to the host, via cali-from-host-endpoint from cali-INPUT) and
// cali-th-<iface> (egress: packets from the host out of the interface, via
// cali-to-host-endpoint from cali-OUTPUT), shaped like workload chains but
// jumping to cali-failsafe-in/-out first, so the failsafe ports (Calico's
// defaults: ssh, DHCP, BGP, etcd, Typha, kube-apiserver) stay open
// whatever the policy. Interfaces without a host endpoint are not touched.
// A host endpoint's policies are split as Calico splits them (see
// calc.Endpoint):
//
//   - Normal policies (with or without applyOnForward) go in cali-fh-/
//     cali-th-.
//
//   - applyOnForward policies also go in cali-fhfw-<iface> and
//     cali-thfw-<iface>, reached from cali-FORWARD through
//     cali-from-hep-forward (packets forwarded in from the interface,
//     skipped when raw or mangle already accepted the packet) and
//     cali-to-hep-forward (packets forwarded out of it). They have no
//     failsafe and no profiles; with no applyOnForward policy in that
//     direction they set the accept mark and return, so forwarded traffic
//     through a host endpoint is only policed by applyOnForward policy
//     (and by the workload's own chains when it goes to or from a pod).
//
//   - preDNAT policies (ingress only) go in the mangle table: mangle
//     PREROUTING jumps to cali-PREROUTING, which accepts RELATED/
//     ESTABLISHED and already-accepted packets, then dispatches by
//     cali-from-host-endpoint to the mangle cali-fh-<iface> (conntrack
//     rules, cali-failsafe-in, the tiers without end-of-tier drops, no
//     profiles). A Deny drops there; an Allow sets the accept mark and
//     cali-PREROUTING accepts; a packet no preDNAT rule decided goes on to
//     the filter table.
//
//   - doNotTrack policies go in the raw table: raw PREROUTING and OUTPUT
//     jump to cali-PREROUTING (workload interfaces skipped) and
//     cali-OUTPUT, which dispatch by interface to the raw cali-fh-/cali-th-
//     (no conntrack rules, a raw failsafe that also lets the replies of
//     failsafe connections through, tiers without end-of-tier drops, no
//     profiles). An Allow sets the accept mark, the endpoint chain sends
//     the packet to NOTRACK and the raw chain accepts it.
//
//   - Normal egress policy also applies, as in Calico, in mangle
//     POSTROUTING (cali-POSTROUTING -> cali-to-host-endpoint -> the mangle
//     cali-th-<iface>, which allows by returning with the accept mark) to
//     host-originated packets that were DNAT'd: filter OUTPUT skips those
//     (`! --ctstate DNAT`) because there the output interface is still the
//     pre-DNAT route's. cali-FORWARD sets the accept mark on what it lets
//     fall through so that POSTROUTING leaves forwarded packets alone.
//
// What raw or mangle accepted keeps the accept mark, and the filter table
// accepts it as Calico does: cali-INPUT (after the workload interfaces)
// and cali-OUTPUT (first) accept marked packets; cali-FORWARD clears only
// the pass mark and skips the incoming forward dispatch for them.
//
// A host endpoint with interfaceName "*" takes every interface that has no
// host endpoint of its own: its chains are cali-fh-any, cali-th-any,
// cali-fhfw-any, cali-thfw-any (and the mangle cali-fh-any), reached by a
// final goto in the dispatch chains after returns for lo (host dispatch)
// and workload interfaces (forward and mangle dispatch). As in Calico it
// takes no untracked policy. A host endpoint with no interface name applies
// to the non-workload interfaces holding one of its expectedIPs, looked up
// in Config.HostInterfaces (the node's interface addresses, which the
// daemon reads through the dataplane); an interface named by a host
// endpoint stays that one's, and among IP-only host endpoints the first by
// name wins.
//
// An endpoint chain accepts ESTABLISHED,RELATED and drops INVALID
// conntrack states, clears the accept and pass marks, then walks the
// tiers: for each tier it clears the pass mark, jumps to each policy chain
// (cali-pi-/cali-po-) while the pass mark is clear, returns as soon as the
// accept mark is set, and at the end of the tier drops packets that no
// policy passed (unless the tier's default action is Pass). Packets that
// passed every tier, and all packets of an endpoint with no policy in that
// direction, go to the endpoint's profile chains (cali-pri-/cali-pro-);
// the chain ends with a drop.
//
// Policy rules: Allow sets the accept mark and returns, Pass sets the pass
// mark and returns, Deny drops, Log logs and continues. A rule whose
// matches need an OR (more than 15 ports, ports and named ports, several
// single CIDRs of one family turned into one set) becomes several iptables
// rules, each with the same action; negated matches are AND'ed in one rule.
//
// TraceChain follows one packet through an endpoint chain as it is
// rendered here (tiers, Pass, end-of-tier drops, profiles, failsafe
// ports, the raw and mangle variants): what `calicoctl policy trace`
// prints, checked against real packets by felix/e2e.
//
// Every rule carries "-m comment --comment cali:<hash>", a hash of the chain
// name, the previous rule's hash and the rule text, so the driver can tell
// which rules it owns and whether a chain is intact by reading hashes only.
// Chain names are at most 28 characters; longer names are shortened to
// prefix + "_" + a hash. Selector, named-port and CIDR ipsets are named
// "cali40"/"cali60" + the calc ipset ID, cut to ipset's 31 characters.
package rules
