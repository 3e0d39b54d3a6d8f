package agent

import (
	"context"
	"slices"

	"github.com/tabbynet/tabby/datastore"
	"github.com/tabbynet/tabby/felix/collector"
	"github.com/tabbynet/tabby/felix/collector/goldmane"
	"github.com/tabbynet/tabby/felix/daemon"
	"github.com/tabbynet/tabby/felix/staged"
)

// startFlowLogs starts the flow log collector when flow logs are on, its
// flow socket when FlowLogsLocalReporter is Enabled and its Goldmane
// client when FlowLogsGoldmaneServer is set, and returns the syncer callbacks to
// use (cb, and the collector's lookups fed from the same updates) and
// the kinds the collector watches beyond felix's own (the staged
// policies, which only the collector reads). A collector that cannot
// start (NFLOG groups held by another process, no conntrack) is logged
// as an error; policy enforcement goes on.
func startFlowLogs(ctx context.Context, r felixRun, cb syncerCallbacks) (datastore.SyncerCallbacks, []string) {
	cfg, log := r.cfg, r.log
	if !cfg.flowLogs {
		return cb, nil
	}
	lookups := collector.NewLookups()
	if daemon.FollowsServices(r.client) {
		lookups.FollowServices()
	}
	store := collector.NewStore(flowStoreSize)
	counters := collector.NewRuleCounters(r.reg)
	ccfg := collector.Config{Node: cfg.hostname, NetnsPath: cfg.netnsPath,
		FlushInterval: cfg.flowFlush, Resolver: lookups, Counters: counters, Metrics: collector.NewMetrics(r.reg), Store: store,
		Log: log.With("component", "collector"), DebugTrace: cfg.flowDebug, EvaluatePending: cfg.flowPending}
	if cfg.goldmane.server != "" {
		gm, err := goldmane.New(goldmane.Config{Server: cfg.goldmane.server, CertFile: cfg.goldmane.cert,
			KeyFile: cfg.goldmane.key, CAFile: cfg.goldmane.ca, Log: log.With("component", "goldmane-client"), Registerer: r.reg})
		if err != nil {
			log.Error("cannot send flows to FlowLogsGoldmaneServer", "error", err)
		} else {
			ccfg.Export = gm.Push
			r.bg.Go(func() { gm.Run(ctx) })
		}
	}
	r.bg.Go(func() {
		if err := collector.Run(ctx, ccfg); err != nil {
			log.Error("flow log collector stopped: no flow logs or rule counters", "error", err)
		}
	})
	if cfg.flowLocal {
		r.bg.Go(func() {
			if err := collector.Serve(ctx, cfg.flowSocketDir, store.Handler()); err != nil {
				log.Error("flow socket stopped: calicoctl flows cannot read this node", "error", err)
			}
		})
	}
	log.Info("flow logs on", "flushInterval", cfg.flowFlush, "socket", cfg.flowLocal, "socketDir", cfg.flowSocketDir,
		"goldmane", cfg.goldmane.server)
	return teeCallbacks{syncerCallbacks: cb, also: lookups}, staged.Kinds
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

// OnUpdates hands the staged policies to also only: felix never
// enforces them.
func (t teeCallbacks) OnUpdates(ups []datastore.Update) {
	t.also.OnUpdates(ups)
	isStaged := func(u datastore.Update) bool { return slices.Contains(staged.Kinds, u.Key.Kind) }
	if slices.ContainsFunc(ups, isStaged) {
		ups = slices.DeleteFunc(slices.Clone(ups), isStaged)
	}
	if len(ups) > 0 {
		t.syncerCallbacks.OnUpdates(ups)
	}
}

// goldmaneConfig is FlowLogsGoldmaneServer and felix's client
// certificate for it.
type goldmaneConfig struct {
	server, cert, key, ca string
}
