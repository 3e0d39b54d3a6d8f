// Package collector is felix's flow log collector: it turns the policy
// verdicts felix's rules log to NFLOG (see felix/rules/nflog.go: groups 1
// ingress and 2 egress, Calico's prefixes) and the kernel's conntrack
// counters into flow logs and per-rule counters.
//
// The core is pure (no kernel, a clock passed in): ParsePrefix reads a
// verdict back from its NFLOG prefix; Aggregator gathers packets (a
// verdict's tuple and the policy hits logged for it) and conntrack counts
// per flow key over a flush interval and emits Flows; Lookups (fed by the
// datastore syncer like felix's calculation) names the endpoints behind
// the IPs and the tiers of the policies; RuleCounters are the Prometheus
// per-rule counters (packets, bytes, connections per tier, policy,
// namespace, direction, rule index and action), counted from the same
// stream, so a scrape reads memory, never iptables.
//
// The edges are Linux-only: an NFLOG reader (nfnetlink_log over
// ti-mo/netfilter, in felix's network namespace), a conntrack poller
// (vishvananda/netlink) and the Server, which serves the flows of the
// last flushes and a live stream as JSON lines over HTTP on a Unix
// socket (Calico's local flow socket path), which `calicoctl flows`
// reads and an aggregator can consume.
//
// Accounting: a denied packet is logged by NFLOG each time (its packets
// and bytes come from the log); an allowed connection is logged once,
// by its first packet (later packets are accepted as ESTABLISHED before
// any policy), so its packets and bytes come from conntrack, polled per
// flush, and are credited to the rule that allowed the connection.
package collector
