package registration

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/tabbynet/tabby/datastore"
)

// Keep registers the node now and again whenever an address of the
// namespace changes (a netlink address subscription, not polling),
// until ctx ends. Changes arriving together are handled once. A failed
// registration is logged and retried at the next change or after retry.
func Keep(ctx context.Context, c datastore.Client, cfg Config, nsh netns.NsHandle, log *slog.Logger) error {
	if log == nil {
		log = slog.Default()
	}
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		return fmt.Errorf("netlink handle: %w", err)
	}
	defer h.Close()
	updates := make(chan netlink.AddrUpdate, 64)
	done := make(chan struct{})
	defer close(done)
	subErr := make(chan error, 1)
	if err := netlink.AddrSubscribeWithOptions(updates, done, netlink.AddrSubscribeOptions{
		Namespace: &nsh,
		ErrorCallback: func(err error) {
			select {
			case subErr <- err:
			default:
			}
		},
	}); err != nil {
		return fmt.Errorf("subscribing to address changes: %w", err)
	}
	const retry = 10 * time.Second
	var retryC <-chan time.Time
	register := func() {
		retryC = nil
		env, err := NetlinkEnv(h)
		if err == nil {
			_, err = Register(ctx, c, cfg, env)
		}
		if err != nil {
			log.Error("registering the node", "node", cfg.NodeName, "error", err)
			retryC = time.After(retry)
			return
		}
		log.Debug("node registered", "node", cfg.NodeName)
	}
	register()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-subErr:
			return fmt.Errorf("address subscription failed: %w", err)
		case <-retryC:
			register()
		case _, ok := <-updates:
			if !ok {
				return fmt.Errorf("address subscription closed")
			}
			// Coalesce a burst (an address replaced is a delete and an add).
			drain := time.After(50 * time.Millisecond)
		coalesce:
			for {
				select {
				case <-updates:
				case <-drain:
					break coalesce
				}
			}
			register()
		}
	}
}
