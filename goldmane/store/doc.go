// Package store is the aggregator's memory (Tabby's Goldmane): the flows
// every node sends, summed per flow key (Calico's FlowKey: both ends'
// names, namespaces and types, destination port, protocol, reporter,
// action and the enforced and pending policy trace) over aggregation
// intervals (Calico's 15 s) and kept for the retention (an hour).
//
// It is pure: callers pass the time (Add, Rollover, List take now). The
// gRPC services (goldmane/server) and the page (goldmane/web) read it.
//
// Memory is bounded twice: at most MaxKeys flow keys and at most
// MaxWindows key-intervals in all; what does not fit is dropped and
// counted (Dropped), never grown into. A key's intervals are kept in
// one slice, oldest first, so expiry trims slice heads.
package store
