// Package rules renders felix's desired model (calc.Result) into iptables
// chains for the filter table and ipset specs, for one IP version at a
// time. It is pure: no exec, no kernel. The text it produces is what the
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
// Host endpoints (with an interface name) get cali-fh-<iface> (ingress:
// packets from the interface to the host, via cali-from-host-endpoint from
// cali-INPUT) and cali-th-<iface> (egress: packets from the host out of
// the interface, via cali-to-host-endpoint from cali-OUTPUT), shaped like
// workload chains but jumping to cali-failsafe-in/-out first, so the
// failsafe ports (Calico's defaults: ssh, DHCP, BGP, etcd, Typha,
// kube-apiserver) stay open whatever the policy. Interfaces without a host
// endpoint are not touched. Forwarded traffic through host endpoints
// (applyOnForward), preDNAT and doNotTrack are not rendered yet.
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
// Every rule carries "-m comment --comment cali:<hash>", a hash of the chain
// name, the previous rule's hash and the rule text, so the driver can tell
// which rules it owns and whether a chain is intact by reading hashes only.
// Chain names are at most 28 characters; longer names are shortened to
// prefix + "_" + a hash. Selector, named-port and CIDR ipsets are named
// "cali40"/"cali60" + the calc ipset ID, cut to ipset's 31 characters.
package rules
