package collector

import (
	"context"

	"github.com/tabbynet/tabby/felix/rules"
)

// Run collects flows until ctx ends: it binds NFLOG groups 1 and 2 (a socket each) and
// reads conntrack in cfg.NetnsPath and publishes each flush to cfg.Store.
func Run(ctx context.Context, cfg Config) error {
	var srcs []packetSource
	for _, g := range []uint16{rules.NFLOGInboundGroup, rules.NFLOGOutboundGroup} {
		r, err := OpenNFLOG(cfg.NetnsPath, g)
		if err != nil {
			return err
		}
		defer r.Close()
		srcs = append(srcs, r)
	}
	ct, err := OpenConntrack(cfg.NetnsPath)
	if err != nil {
		return err
	}
	defer ct.Close()
	return loop(ctx, cfg, srcs, ct)
}
