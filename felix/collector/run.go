package collector

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/tabbynet/tabby/felix/rules"
)

// Config configures a collector.
type Config struct {
	// Node names the reporting node in each flow.
	Node string
	// NetnsPath is the network namespace felix programs ("" its own).
	NetnsPath string
	// FlushInterval is Calico's FlowLogsFlushInterval: flows are emitted
	// (and conntrack read) once per interval.
	FlushInterval time.Duration
	// ConntrackInterval is how often connection counts are read between
	// flushes (default: 5 s or the flush interval if shorter).
	ConntrackInterval time.Duration
	Resolver          Resolver
	Counters          *RuleCounters // may be nil
	Store             *Store
	Log               *slog.Logger
	// DebugTrace logs every flow at Info (FlowLogsCollectorDebugTrace).
	DebugTrace bool
}

// packetSource is an NFLOG reader; connDumper a conntrack table.
type packetSource interface {
	Run(ctx context.Context, out func(group uint16, p Packet)) error
}

type connDumper interface {
	Dump() (map[Tuple]Conn, error)
}

type groupPacket struct {
	group uint16
	p     Packet
}

// loop is the collector's single goroutine: the aggregator takes
// packets as they come, a conntrack dump every ConntrackInterval and is
// flushed to the Store every FlushInterval.
func loop(ctx context.Context, cfg Config, src packetSource, ct connDumper) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.FlushInterval <= 0 {
		return fmt.Errorf("flow log flush interval %v: must be positive", cfg.FlushInterval)
	}
	if cfg.ConntrackInterval <= 0 {
		cfg.ConntrackInterval = min(5*time.Second, cfg.FlushInterval)
	}
	agg := NewAggregator(cfg.Node, cfg.Resolver, cfg.Counters, cfg.Log, time.Now())
	pkts := make(chan groupPacket, 4096)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	srcDone := make(chan error, 1)
	go func() {
		srcDone <- src.Run(ctx, func(g uint16, p Packet) {
			select {
			case pkts <- groupPacket{g, p}:
			case <-ctx.Done():
			}
		})
	}()
	flush := time.NewTicker(cfg.FlushInterval)
	defer flush.Stop()
	poll := time.NewTicker(cfg.ConntrackInterval)
	defer poll.Stop()
	dump := func() {
		conns, err := ct.Dump()
		if err != nil {
			cfg.Log.Warn("cannot read conntrack; allowed flows' counts wait for the next read", "error", err)
			return
		}
		agg.Conntrack(conns)
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcDone:
			return err
		case gp := <-pkts:
			agg.Add(gp.group == rules.NFLOGInboundGroup, gp.p)
		case <-poll.C:
			dump()
		case now := <-flush.C:
			dump()
			flows := agg.Flush(now)
			if cfg.DebugTrace {
				for _, f := range flows {
					cfg.Log.Info("flow", "flow", f)
				}
			}
			cfg.Store.Publish(flows)
		}
	}
}
