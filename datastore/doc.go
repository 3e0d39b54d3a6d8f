// Package datastore is the one client every Tabby component uses to read
// and write resources: create, compare-and-swap update, (conditional)
// delete, get, list by namespace or label selector, and watch from a
// revision. Two backends implement it with identical semantics, proven by
// one behavioural suite (datastore/dstest):
//
//   - datastore/etcd: etcd v3, Calico's key layout, CAS by mod-revision.
//   - datastore/kdd: the Kubernetes API, crd.projectcalico.org/v1 CRDs via
//     client-go, plus Calico's read-only mapping of native resources.
//
// Writes default and validate the object first; an invalid object never
// reaches the store. Checks that need other objects (an IPPool overlapping
// another, a changed pool CIDR) run next, and a create that raced a
// conflicting one is undone after the fact (writecheck.go). Long-running consumers (felix, confd) use a Syncer
// rather than raw watches: a consistent snapshot, an in-sync signal, then
// ordered updates, surviving compaction and outages.
//
// A stored record that cannot be decoded (written behind the client's
// back: truncated JSON, a field of the wrong type) never takes its kind
// down: Get returns a BadRecord (ErrUndecodable), List leaves it out of
// Items and names it in List.Bad, a watch delivers EventUndecodable and
// goes on, Delete removes it. Syncers skip it (a record that turns bad is
// delivered as Deleted, as Calico does), and log and count it once per key
// and revision (tabby_datastore_undecodable_records_total; see
// RegisterMetrics). Callers that must see every record before acting (a
// leak check) use List.Complete.
package datastore
