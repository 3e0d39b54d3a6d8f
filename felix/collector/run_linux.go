package collector

import (
	"context"

	"github.com/tabbynet/tabby/felix/rules"
)

// Run collects flows until ctx ends: it binds NFLOG groups 1 and 2 and
// reads conntrack in cfg.NetnsPath and publishes each flush to cfg.Store.
func Run(ctx context.Context, cfg Config) error {
	r, err := OpenNFLOG(cfg.NetnsPath, rules.NFLOGInboundGroup, rules.NFLOGOutboundGroup)
	if err != nil {
		return err
	}
	defer r.Close()
	ct, err := OpenConntrack(cfg.NetnsPath)
	if err != nil {
		return err
	}
	defer ct.Close()
	return loop(ctx, cfg, r, ct)
}
