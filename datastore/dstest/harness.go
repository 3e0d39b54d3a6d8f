package dstest

import (
	"testing"

	"github.com/tabbynet/tabby/datastore"
)

// Harness gives the suite a backend over a real server.
type Harness struct {
	// New returns a client over a fresh, empty store (fresh per call, or
	// at least free of the suite's names).
	New func(t *testing.T) datastore.Client
	// ForceRevisionGone makes watches from the given revision fail with
	// ErrRevisionGone (e.g. by compacting etcd past it).
	ForceRevisionGone func(t *testing.T, c datastore.Client, rev string)
	// StopServer and StartServer take the store down and bring it back
	// with its data.
	StopServer  func(t *testing.T)
	StartServer func(t *testing.T)
	// PutUndecodable stores at k, behind the client's back (creating or
	// replacing), a record the client cannot decode: what an operator's
	// etcdctl or kubectl can write.
	PutUndecodable func(t *testing.T, k datastore.Key)
}

// Run runs the whole suite.
func Run(t *testing.T, h Harness) {
	t.Run("CreateGet", func(t *testing.T) { testCreateGet(t, h.New(t)) })
	t.Run("CreateExisting", func(t *testing.T) { testCreateExisting(t, h.New(t)) })
	t.Run("InvalidWriteStoresNothing", func(t *testing.T) { testInvalidWrite(t, h.New(t)) })
	t.Run("UpdateCAS", func(t *testing.T) { testUpdateCAS(t, h.New(t)) })
	t.Run("PoolOverlapRefused", func(t *testing.T) { testPoolOverlap(t, h.New(t)) })
	t.Run("PolicyTierMustExist", func(t *testing.T) { testTierMustExist(t, h.New(t)) })
	t.Run("Delete", func(t *testing.T) { testDelete(t, h.New(t)) })
	t.Run("ListByNamespaceAndSelector", func(t *testing.T) { testList(t, h.New(t)) })
	t.Run("Initialize", func(t *testing.T) { testInitialize(t, h.New(t)) })
	t.Run("WatchFromRevision", func(t *testing.T) { testWatch(t, h.New(t)) })
	t.Run("WatchRevisionGone", func(t *testing.T) { testWatchGone(t, h) })
	t.Run("SyncerSnapshotInSyncUpdates", func(t *testing.T) { testSyncer(t, h.New(t)) })
	t.Run("SyncerAcrossCompaction", func(t *testing.T) { testSyncerRelist(t, h) })
	t.Run("UndecodableListGetDelete", func(t *testing.T) { testUndecodableCRUD(t, h) })
	t.Run("UndecodableWatchGoesOn", func(t *testing.T) { testUndecodableWatch(t, h) })
	t.Run("UndecodableSyncerSkips", func(t *testing.T) { testUndecodableSyncer(t, h) })
	// Last: it stops and restarts the server.
	t.Run("ServerDownThenBack", func(t *testing.T) { testServerDown(t, h) })
}
