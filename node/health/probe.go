package health

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/tabbynet/tabby/node/birdctl"
)

// Probe says what `calico-node -felix-live ...` checks.
type Probe struct {
	FelixLive, FelixReady bool
	BIRDLive, BIRDReady   bool
	BIRD6Live, BIRD6Ready bool
	// Threshold is -threshold-time (Calico's default 30s).
	Threshold time.Duration
	// BaseURL is the health endpoint, e.g. http://localhost:9099.
	BaseURL string
	// BIRDSocket is BIRD's control socket; NodenameFile the node name
	// file whose age starts the threshold.
	BIRDSocket, NodenameFile string
}

// Run performs the checks and returns the first failure, worded as
// Calico's ("calico/node is not ready: ...").
func (p Probe) Run(ctx context.Context) error {
	if !p.FelixLive && !p.FelixReady && !p.BIRDLive && !p.BIRDReady && !p.BIRD6Live && !p.BIRD6Ready {
		return errors.New("calico/node check error: must specify at least one of -bird-live, -bird6-live, -felix-live, -bird-ready, -bird6-ready, or -felix-ready")
	}
	ctx, cancel := context.WithTimeout(ctx, p.Threshold)
	defer cancel()
	if p.FelixLive {
		if err := p.endpoint(ctx, "liveness"); err != nil {
			return fmt.Errorf("calico/node is not ready: Felix is not live: %w", err)
		}
	}
	if p.FelixReady {
		if err := p.endpoint(ctx, "readiness"); err != nil {
			return fmt.Errorf("calico/node is not ready: felix is not ready: %w", err)
		}
	}
	for _, c := range []struct {
		live, ready bool
		v           int
		name        string
	}{{p.BIRDLive, p.BIRDReady, 4, "BIRD"}, {p.BIRD6Live, p.BIRD6Ready, 6, "BIRD6"}} {
		if c.live {
			lines, err := birdctl.Command(ctx, p.BIRDSocket, "show status")
			if err != nil {
				return fmt.Errorf("calico/node is not ready: %s is not live: %w", strings.ToLower(c.name), err)
			}
			if !birdctl.ParseStatus(lines).Up {
				return fmt.Errorf("calico/node is not ready: bad response from %s", strings.ToLower(c.name))
			}
		}
		if c.ready {
			if err := p.birdReady(ctx, c.v); err != nil {
				return fmt.Errorf("calico/node is not ready: %s is not ready: %w", c.name, err)
			}
		}
	}
	return nil
}

// endpoint asks felix's component of the health endpoint.
func (p Probe) endpoint(ctx context.Context, kind string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.BaseURL+"/"+kind+"?component=felix", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s probe reporting %d", kind, resp.StatusCode)
	}
	return nil
}

func (p Probe) birdReady(ctx context.Context, v int) error {
	st, err := os.Stat(p.NodenameFile)
	if err != nil {
		return fmt.Errorf("failed to stat() nodename file: %w", err)
	}
	lines, err := birdctl.Command(ctx, p.BIRDSocket, "show protocols")
	if err != nil {
		return err
	}
	peers := PeersOfVersion(birdctl.Peers(lines), v)
	gr := false
	if len(peers) > 0 && time.Since(st.ModTime()) < p.Threshold {
		sl, err := birdctl.Command(ctx, p.BIRDSocket, "show status")
		if err != nil {
			return err
		}
		gr = birdctl.ParseStatus(sl).GracefulRestart
	}
	return BIRDReady(peers, gr, time.Since(st.ModTime()), p.Threshold)
}
