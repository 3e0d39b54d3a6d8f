package datastore

import (
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// ErrUndecodable means a stored record cannot be decoded as its kind
// (truncated JSON, a field of the wrong type, metadata that is not JSON):
// something wrote it behind the client's back. Get returns it (as a
// BadRecord); List and watches skip such records and report them instead
// (List.Bad, EventUndecodable), so one bad record never hides the others.
var ErrUndecodable = errors.New("stored record cannot be decoded")

// BadRecord is one stored record that cannot be decoded. It is an error
// matching ErrUndecodable and wrapping the decoder's error.
type BadRecord struct {
	// Key is the record's key as far as where it is stored tells (the
	// etcd key, or the custom resource's namespace and name).
	Key Key
	// StorageKey is where it is stored: the etcd key, or
	// "<resource>/<namespace>/<name>" in the Kubernetes API.
	StorageKey string
	// Revision is the record's revision (its etcd mod-revision or
	// Kubernetes resource version): a delete guarded by it removes
	// exactly this record.
	Revision string
	Err      error
}

func (b BadRecord) Error() string {
	return fmt.Sprintf("stored record %s (revision %s) cannot be decoded: %v", b.StorageKey, b.Revision, b.Err)
}

// Is makes a BadRecord match ErrUndecodable.
func (b BadRecord) Is(target error) bool { return target == ErrUndecodable }

func (b BadRecord) Unwrap() error { return b.Err }

// undecodableRecords counts undecodable records seen by syncers: each
// record (key and revision) once, however often it is relisted
// (tabby_datastore_undecodable_records_total, see datastore/dsmetrics).
var undecodableRecords kindCounts

// UndecodableRecords is the count behind
// tabby_datastore_undecodable_records_total for kind.
func UndecodableRecords(kind string) uint64 { return undecodableRecords.get(kind) }

// MetricCounts returns, per kind, the undecodable records and the
// unconvertible rules counted so far in this process (for
// datastore/dsmetrics, which exposes them to Prometheus).
func MetricCounts() (undecodable, unconvertible map[string]uint64) {
	return undecodableRecords.all(), unconvertibleRules.all()
}

// BadRecordReporter is how a syncer reports the undecodable records it
// skips: logged (with key and error) and counted once per record and
// revision, not on every relist. A syncer calls Seen for each bad record
// it meets and Gone when the record under that id decodes again or is
// deleted, so that a later bad revision is reported again. Safe for
// concurrent use.
type BadRecordReporter struct {
	Logger *slog.Logger // slog.Default() when nil

	mu   sync.Mutex
	seen map[string]string // id -> revision reported
}

// Seen reports b under id (any string naming the stored record) unless
// this revision of it was reported already.
func (r *BadRecordReporter) Seen(id string, b BadRecord) {
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]string{}
	}
	rev, ok := r.seen[id]
	r.seen[id] = b.Revision
	r.mu.Unlock()
	if ok && rev == b.Revision {
		return
	}
	undecodableRecords.add(b.Key.Kind, 1)
	log := r.Logger
	if log == nil {
		log = slog.Default()
	}
	log.Error("skipping a stored record that cannot be decoded; it is absent until fixed or deleted",
		"kind", b.Key.Kind, "key", b.Key.String(), "storageKey", b.StorageKey, "revision", b.Revision, "err", b.Err)
}

// Gone forgets the record under id: it decodes now, or was deleted.
func (r *BadRecordReporter) Gone(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.seen, id)
}

// Bad returns how many records are currently known to be undecodable.
func (r *BadRecordReporter) Bad() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}
