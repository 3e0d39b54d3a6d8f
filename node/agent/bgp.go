package agent

import (
	"context"
	"errors"
	"time"

	"github.com/tabbynet/tabby/node/birdctl"
	"github.com/tabbynet/tabby/node/health"
)

// bgpReadyThreshold is Calico's -threshold-time default: for this long
// after the start every session must be up; after it, one is enough.
const bgpReadyThreshold = 30 * time.Second

// bgpChecker is the bgp component's readiness: BIRD's sessions by
// Calico's rule (health.BIRDReady).
type bgpChecker struct {
	socket string
	start  time.Time
}

// ready reads BIRD's sessions now (health asks on each probe).
func (b *bgpChecker) ready() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	lines, err := birdctl.Command(ctx, b.socket, "show protocols")
	if err != nil {
		return false, "BIRD does not answer: " + err.Error()
	}
	peers := birdctl.Peers(lines)
	gr := false
	if time.Since(b.start) < bgpReadyThreshold && len(peers) > 0 {
		if sl, err := birdctl.Command(ctx, b.socket, "show status"); err == nil {
			gr = birdctl.ParseStatus(sl).GracefulRestart
		}
	}
	var errs []error
	for _, v := range []int{4, 6} {
		if err := health.BIRDReady(health.PeersOfVersion(peers, v), gr, time.Since(b.start), bgpReadyThreshold); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return false, err.Error()
	}
	return true, ""
}
