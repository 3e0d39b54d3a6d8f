package datastore

import (
	"log/slog"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
)

// unconvertibleRules counts rules of derived policies (a Kubernetes
// ClusterNetworkPolicy's) that could not be converted and fail closed.
var unconvertibleRules = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "tabby_datastore_unconvertible_rules_total",
	Help: "Rules of derived policies (Kubernetes ClusterNetworkPolicies) that could not be converted and fail closed (a Deny or Pass denies all, an Accept is dropped), each policy revision counted once.",
}, []string{"kind"})

// UnconvertibleRulesCounter is the counter behind
// tabby_datastore_unconvertible_rules_total, for tests.
func UnconvertibleRulesCounter(kind string) prometheus.Counter {
	return unconvertibleRules.WithLabelValues(kind)
}

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
	unconvertibleRules.WithLabelValues(key.Kind).Add(float64(rules))
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
