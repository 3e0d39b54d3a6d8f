// Package compactor compacts etcd's history periodically, as Calico's
// kube-controllers does in etcd mode (etcdV3CompactionPeriod,
// COMPACTION_PERIOD; default 10m). Each period it compacts up to the
// revision seen one period earlier, so watchers always have a full period
// of history to resume from. Compactors sharing an etcd (other
// kube-controllers replicas, a kube-apiserver using the same etcd) agree
// through a compare-and-swap on the key "compact_rev_key", the key and
// protocol kube-apiserver uses: whoever bumps its version compacts, the
// others only follow the version.
package compactor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tabbynet/tabby/datastore/etcd"
)

// RevKey is the key compactors coordinate on.
const RevKey = "compact_rev_key"

// Dial connects to the etcd the datastore configuration names. SRV
// discovery is not supported here (the datastore resolves it itself).
func Dial(cfg etcd.Config) (*clientv3.Client, error) {
	var eps []string
	for _, e := range cfg.Endpoints {
		if e = strings.TrimSpace(e); e != "" {
			eps = append(eps, e)
		}
	}
	if len(eps) == 0 {
		return nil, errors.New("etcd compaction needs etcdEndpoints (ETCD_ENDPOINTS); SRV discovery is not supported for it")
	}
	tlsCfg, err := etcd.NewTLSConfig(cfg.TLS)
	if err != nil {
		return nil, fmt.Errorf("etcd TLS for compaction: %w", err)
	}
	return clientv3.New(clientv3.Config{Endpoints: eps, TLS: tlsCfg, Username: cfg.Username, Password: cfg.Password,
		DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
}

// Run compacts every period until ctx ends. period must be positive.
func Run(ctx context.Context, kv clientv3.KV, period time.Duration, log *slog.Logger, onCompact func(rev int64)) {
	var version, rev int64
	t := time.NewTicker(period)
	defer t.Stop()
	for {
		var err error
		var compacted bool
		version, rev, compacted, err = step(ctx, kv, version, rev)
		switch {
		case err != nil && ctx.Err() == nil:
			log.Error("etcd compaction", "err", err)
		case compacted:
			log.Info("compacted etcd", "revision", rev)
			if onCompact != nil {
				onCompact(rev)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// step is one round: if RevKey's version is still the one this compactor
// last saw, it takes the round (bumping the version, recording the current
// revision) and compacts to the revision recorded a round ago; otherwise
// it adopts the other compactor's version. It returns the version and
// revision to use next round.
func step(ctx context.Context, kv clientv3.KV, version, prev int64) (int64, int64, bool, error) {
	resp, err := kv.Txn(ctx).If(
		clientv3.Compare(clientv3.Version(RevKey), "=", version),
	).Then(
		clientv3.OpPut(RevKey, strconv.FormatInt(prev, 10)),
	).Else(
		clientv3.OpGet(RevKey),
	).Commit()
	if err != nil {
		return version, prev, false, fmt.Errorf("taking the compaction round: %w", err)
	}
	cur := resp.Header.Revision
	if !resp.Succeeded {
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			return 0, cur, false, nil
		}
		return kvs[0].Version, cur, false, nil
	}
	if prev == 0 {
		return version + 1, cur, false, nil // first round: nothing seen a round ago
	}
	if _, err := kv.Compact(ctx, prev); err != nil && !errors.Is(err, rpctypes.ErrCompacted) {
		return version + 1, cur, false, fmt.Errorf("compacting to revision %d: %w", prev, err)
	}
	return version + 1, cur, true, nil
}
