package daemon

import (
	"context"
	"log/slog"
	"time"

	"k8s.io/client-go/kubernetes"

	v3 "github.com/tabbynet/tabby/api/v3"
	"github.com/tabbynet/tabby/typha/discovery"
	"github.com/tabbynet/tabby/typha/snapcache"
)

// MaxConnLimit is the connection limit of one of typhas replicas serving
// nodes nodes with syncers connections each, as Calico's Typha computes
// it: the nodes' share of all but one replica (so that the rest can take
// a replica's clients during a rolling update), plus 20% headroom, within
// [lower, upper]; a lone replica takes up to upper. reason says which
// bound decided.
func MaxConnLimit(r Rebalance, typhas, nodes, syncers int) (limit int, reason string) {
	if typhas <= 1 {
		return r.MaxConnsUpper, "lone typha"
	}
	limit, reason = r.MaxConnsLower, "configured lower limit"
	if share := syncers * (1 + nodes*120/(typhas-1)/100); share > limit {
		limit, reason = share, "fraction+20%"
	}
	if limit > r.MaxConnsUpper {
		limit, reason = r.MaxConnsUpper, "configured upper limit"
	}
	return limit, reason
}

// limiter is what the rebalancer sets (the sync server).
type limiter interface{ SetMaxConns(n int) }

// rebalance sets srv's connection limit every PollInterval from the
// number of Typhas behind the Service and of Nodes in felix's stream;
// when either is unknown, the upper limit.
func rebalance(ctx context.Context, r Rebalance, kube kubernetes.Interface, felix *snapcache.Cache, syncers int, srv limiter, log *slog.Logger) {
	tick := time.NewTicker(r.PollInterval)
	defer tick.Stop()
	active := r.MaxConnsUpper
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		limit, reason := r.MaxConnsUpper, "error"
		typhas, err := discovery.CountReplicas(ctx, kube, r.K8sNamespace, r.K8sServiceName, r.K8sPortName)
		nodes, inSync := felix.Count(v3.KindNode)
		switch {
		case err != nil || typhas <= 0:
			log.Warn("Failed to get number of Typhas", "numTyphas", typhas, "error", err)
		case !inSync || nodes <= 0:
			log.Warn("Failed to get number of nodes", "numNodes", nodes, "inSync", inSync)
		default:
			limit, reason = MaxConnLimit(r, typhas, nodes, syncers)
		}
		if limit != active {
			log.Info("Calculated new connection limit.", "numTyphas", typhas, "numNodes", nodes, "numSyncerTypes", syncers,
				"newLimit", limit, "reason", reason)
			srv.SetMaxConns(limit)
			active = limit
		}
	}
}
