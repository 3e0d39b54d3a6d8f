package datastore

import (
	"log/slog"
	"sync"
)

// unconvertibleRules counts rules of derived policies (a Kubernetes
// ClusterNetworkPolicy's) that could not be converted and fail closed
// (tabby_datastore_unconvertible_rules_total, see datastore/dsmetrics).
var unconvertibleRules kindCounts

// UnconvertibleRules is the count behind
// tabby_datastore_unconvertible_rules_total for kind.
func UnconvertibleRules(kind string) uint64 { return unconvertibleRules.get(kind) }

// PartialReporter reports objects converted from another API whose
// conversion replaced or dropped rules: logged and counted once per
// object and revision, not on every relist. Safe for concurrent use.
type PartialReporter struct {
	Logger *slog.Logger // slog.Default() when nil

	mu   sync.Mutex
	seen map[Key]string // -> revision reported
}

// Seen reports that revision rev of the object under key converted with
// rules rules failing closed (err says which and why).
func (r *PartialReporter) Seen(key Key, rev string, rules int, err error) {
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[Key]string{}
	}
	old, ok := r.seen[key]
	r.seen[key] = rev
	r.mu.Unlock()
	if ok && old == rev {
		return
	}
	unconvertibleRules.add(key.Kind, uint64(rules))
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Warn("policy only partly converted: rules that cannot be converted fail closed",
		"kind", key.Kind, "key", key.String(), "revision", rev, "rules", rules, "err", err)
}

// Gone forgets the object under key: it converts whole now, or was
// deleted.
func (r *PartialReporter) Gone(key Key) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, key)
}
