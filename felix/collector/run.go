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
	Metrics           *Metrics      // may be nil
	Store             *Store
	// Export, if set, takes each flush's flows too (the Goldmane
	// client's Push); it must not block.
	Export func([]Flow)
	Log    *slog.Logger
	// DebugTrace logs every flow at Info (FlowLogsCollectorDebugTrace).
	DebugTrace bool
	// EvaluatePending gives flows their pending policies
	// (FlowLogsPolicyEvaluationMode Continuous).
	EvaluatePending bool
}

// packetSource is an NFLOG reader (one per group); connDumper a
// conntrack table.
type packetSource interface {
	Run(ctx context.Context, out func(p Packet), overrun func()) error
	Group() uint16
}

type connDumper interface {
	Dump() (map[Tuple]Conn, error)
}

type groupPacket struct {
	group uint16
	p     Packet
}

// startReaders runs each source in a goroutine of its own (ended with
// ctx), handing its packets to the channel returned and counting them;
// a reader's end (an error) comes on the second channel.
func startReaders(ctx context.Context, srcs []packetSource, m *Metrics) (<-chan groupPacket, <-chan error) {
	pkts := make(chan groupPacket, 4096)
	done := make(chan error, len(srcs))
	for _, src := range srcs {
		g := groupLabel(src.Group())
		logs, overruns, blocked := m.logs.WithLabelValues(g), m.overruns.WithLabelValues(g), m.blocked.WithLabelValues(g)
		send := func(p Packet) {
			logs.Inc()
			select {
			case pkts <- groupPacket{src.Group(), p}:
				return
			default:
			}
			start := time.Now()
			select {
			case pkts <- groupPacket{src.Group(), p}:
			case <-ctx.Done():
			}
			blocked.Add(time.Since(start).Seconds())
		}
		go func() { done <- src.Run(ctx, send, overruns.Inc) }()
	}
	return pkts, done
}

// loop is the collector's single goroutine: the aggregator takes
// packets as they come, a conntrack dump every ConntrackInterval and is
// flushed to the Store every FlushInterval.
func loop(ctx context.Context, cfg Config, srcs []packetSource, ct connDumper) error {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.FlushInterval <= 0 {
		return fmt.Errorf("flow log flush interval %v: must be positive", cfg.FlushInterval)
	}
	if cfg.ConntrackInterval <= 0 {
		cfg.ConntrackInterval = min(5*time.Second, cfg.FlushInterval)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(nil)
	}
	m := cfg.Metrics
	agg := NewAggregator(cfg.Node, cfg.Resolver, cfg.Counters, cfg.Log, time.Now())
	agg.EvaluatePending = cfg.EvaluatePending
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	pkts, srcDone := startReaders(ctx, srcs, m)
	flush := time.NewTicker(cfg.FlushInterval)
	defer flush.Stop()
	poll := time.NewTicker(cfg.ConntrackInterval)
	defer poll.Stop()
	dump := func() {
		start := time.Now()
		conns, err := ct.Dump()
		if err != nil {
			cfg.Log.Warn("cannot read conntrack; allowed flows' counts wait for the next read", "error", err)
			return
		}
		agg.Conntrack(conns)
		m.conntrack.Observe(time.Since(start).Seconds())
		m.tracked.Set(float64(agg.Tracked()))
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-srcDone:
			return err
		case gp := <-pkts:
			before, created := agg.ParseErrors, agg.Created
			agg.Add(gp.group == rules.NFLOGInboundGroup, gp.p)
			if agg.ParseErrors != before {
				m.parseErrors.WithLabelValues(groupLabel(gp.group)).Inc()
			}
			m.created.Add(float64(agg.Created - created))
		case <-poll.C:
			dump()
		case <-flush.C:
			dump()
			// The interval ends now, not at the tick: packets taken
			// after the tick fired (while the loop was busy) are in it.
			flows := agg.Flush(time.Now())
			m.flushed.Add(float64(len(flows)))
			if cfg.DebugTrace {
				for _, f := range flows {
					cfg.Log.Info("flow", "flow", f)
				}
			}
			cfg.Store.Publish(flows)
			if cfg.Export != nil {
				cfg.Export(flows)
			}
		}
	}
}
