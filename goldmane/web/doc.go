// Package web is Tabby's page for the aggregator's flows (like Calico's
// Whisker): plain HTML and JavaScript embedded in the binary (no build
// step), served by the aggregator next to its gRPC API.
//
// The page loads every kept flow once (/api/flows: the store's List over
// the retention), then follows each interval's changes (/api/stream,
// server-sent events from a store subscription), and filters in the
// browser by namespace (either end), policy (enforced or pending, by
// name), action, reporter and pending verdict. A denied flow between two
// named endpoints carries the `calicoctl policy trace` command that
// explains it (the same calculation felix runs).
package web
