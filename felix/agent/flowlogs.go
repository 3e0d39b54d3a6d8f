package agent

import (
	"context"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/collector"
)

// startFlowLogs starts the flow log collector and its flow socket when
// FlowLogsLocalReporter is Enabled, and returns the syncer callbacks to
// use: cb, and the collector's lookups fed from the same updates. A
// collector that cannot start (NFLOG groups held by another process, no
// conntrack) is logged as an error; policy enforcement goes on.
func startFlowLogs(ctx context.Context, r felixRun, cb syncerCallbacks) datastore.SyncerCallbacks {
	cfg, log := r.cfg, r.log
	if !cfg.flowLogs {
		return cb
	}
	lookups := collector.NewLookups()
	store := collector.NewStore(flowStoreSize)
	counters := collector.NewRuleCounters(r.reg)
	r.bg.Go(func() {
		err := collector.Run(ctx, collector.Config{Node: cfg.hostname, NetnsPath: cfg.netnsPath,
			FlushInterval: cfg.flowFlush, Resolver: lookups, Counters: counters, Metrics: collector.NewMetrics(r.reg), Store: store,
			Log: log.With("component", "collector"), DebugTrace: cfg.flowDebug})
		if err != nil {
			log.Error("flow log collector stopped: no flow logs or rule counters", "error", err)
		}
	})
	r.bg.Go(func() {
		if err := collector.Serve(ctx, cfg.flowSocketDir, store.Handler()); err != nil {
			log.Error("flow socket stopped: calicoctl flows cannot read this node", "error", err)
		}
	})
	log.Info("flow logs on", "flushInterval", cfg.flowFlush, "socket", cfg.flowSocketDir)
	return teeCallbacks{syncerCallbacks: cb, also: lookups}
}

// flowStoreSize is how many flows the node keeps for `calicoctl flows`.
const flowStoreSize = 10000

// syncerCallbacks are the daemon's: the syncer's callbacks and the
// snapshot sizes.
type syncerCallbacks interface {
	datastore.SyncerCallbacks
	datastore.SnapshotSizer
}

// teeCallbacks hands every update to the daemon and to also.
type teeCallbacks struct {
	syncerCallbacks
	also datastore.SyncerCallbacks
}

func (t teeCallbacks) OnUpdates(ups []datastore.Update) {
	t.also.OnUpdates(ups)
	t.syncerCallbacks.OnUpdates(ups)
}
