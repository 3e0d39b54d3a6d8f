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
package datastore
