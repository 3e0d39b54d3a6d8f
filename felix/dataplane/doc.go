// Package dataplane holds felix's kernel drivers: they take the desired
// state rendered by package rules and reconcile the kernel to it.
//
// Each driver splits an apply into a pure plan and an apply step:
// planTable (iptables_plan.go) and planSets (ipsets_plan.go) decide from
// the desired state and what the kernel holds what to change, and the
// plan's encoders give the transaction text; Table.Apply and IPSets
// execute plans and record the outcome. A retry is a new plan, never an
// edit of an old transaction's text.
//
// Table owns felix's chains in one iptables table of one IP version. It
// keeps the desired chains and a cache of what it believes the kernel has
// (chain name -> rule hashes, read from iptables-save). Each Apply sends
// the plan as ONE `iptables-restore --noflush` transaction: a chain whose
// hashes differ is re-declared (which flushes it) and rewritten whole,
// stale cali- chains are flushed and deleted, and the hook rules in the
// base chains are kept exactly one, at the top (at the end with
// ChainInsertMode Append, Config.AppendHooks). Rules and chains felix does
// not own (no cali- prefix, no cali: hash comment) are never touched.
// After a successful restore the cache is updated without reading the
// kernel back, so a change to one policy costs one small restore; when a
// refresh is asked for the cache is dropped and the next Apply reads the
// kernel again (full resync), which is also what repairs drift made by
// others.
//
// A stale chain that someone else's rule still jumps to cannot be deleted;
// the apply is then re-planned keeping stale chains (flushed) so that it
// never blocks other updates, and the deletion is tried again on the next
// apply. The same goes for stale ipsets still in use.
//
// IPSets owns the ipsets whose names start with cali4/cali6 the same way:
// new sets are created and filled, changed sets are patched with add/del
// when the change is small and rebuilt in a temporary set and swapped in
// atomically otherwise; sets no longer wanted are destroyed only after the
// iptables rules that used them are gone. Members are written as the
// kernel can hold them: a /0 network, which hash:net refuses, as its two
// /1 halves (as Calico's felix does). An apply that only adds and
// deletes members of sets the kernel has (a remote endpoint coming or
// going: the common change at cluster scale) needs no process at all when
// the Runner implements IPSetMembers: ExecRunner writes those members
// through a netlink socket kept per namespace (ipset_members_linux.go).
//
// No single set or chain can stop the node's dataplane. A failed write is
// re-planned from a fresh read of the kernel and tried once more whole,
// then in halves until each failing set or chain is alone; those are
// recorded as failed (failures.go: logged with their names, counted in
// felix_dataplane_object_failures_total, named by Dataplane.Ready, retried
// with exponential backoff and at once when their desired state changes)
// and everything else is programmed. What depends on a failed object
// fails closed, never open: a rule matching a failed ipset loses that
// match and drops what it still matches (failClosed: a Deny denies more,
// an Allow allows nothing; in nat it returns, translating nothing), and a
// failed chain is replaced by one that drops everything (dropChain).
//
// Dataplane keeps one Table per table felix programs (raw, mangle, filter,
// applied in that order, each its own transaction) and IP version, and
// sequences the drivers (ipsets, then iptables, then stale ipset removal)
// and runs the loop: apply on change, refresh periodically, retry whole
// failures (a table or the sets unreadable) with exponential backoff from
// a full resync, and failed objects on their own backoff without holding
// up other changes.
//
// Every command goes through a Runner. The real one (ExecRunner, Linux)
// executes the iptables and ipset binaries, optionally inside a network
// namespace (tables and ipsets are per network namespace): the child is
// started from a per-namespace OS thread that entered the namespace with
// setns and is never handed back to the Go scheduler (exec_netns_linux.go),
// which saves nsenter's extra exec (~1.5 ms) on every call. The fake in dataplane/testing simulates the
// kernel's view well enough for unit tests and injects failures.
//
// With Config.NFTables (FelixConfiguration nftablesMode Enabled, or Auto
// with kube-proxy in nftables mode) the same rendered rulesets go to the
// nftables driver instead (nft.go): Calico's layout (a table "calico"
// per family, chains <iptables table>-<chain>, base chains at Calico's
// priorities, ipsets as named sets), written through google/nftables
// over a netlink socket (no process), one atomic transaction per apply for
// both families, endpoint dispatch through verdict maps, set members
// patched from the renderer's changes; a refresh rebuilds both tables in
// one transaction (repairing drift without a gap). A failed transaction
// changes nothing (it is atomic): it is retried from a rebuild with
// backoff, and readiness says so meanwhile; a rule the translation does
// not understand is programmed as a DROP (fail closed). Config.
// AfterFirstSync removes the other mode's rules once the first apply is
// in (CleanupBackend + CleanupIPSets, or CleanupNftables).
//
// The interface addresses host endpoints given by expectedIPs need come
// from felix/ifacewatch, as an input of the calculation, not from here.
package dataplane
