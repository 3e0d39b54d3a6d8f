// Package dstest is the behavioural test suite every datastore backend
// must pass unchanged: the backends' own tests call Run with a Harness that
// starts the real server. It proves the semantics consumers rely on: CAS
// conflicts, not-found and conditional deletes, lists by namespace and
// selector, watches from a revision and after compaction, and the syncer's
// snapshot, in-sync signal, updates and recovery from an outage.
package dstest
