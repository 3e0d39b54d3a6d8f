package health

import (
	"errors"
	"net/netip"
	"strings"
	"time"

	"github.com/tabbynet/tabby/node/birdctl"
)

// BIRDReady is Calico's BGP readiness rule over the sessions of one IP
// version: with no peers BIRD is ready; within threshold of the agent's
// start (Calico: the node name file's age) every session must be
// Established and no graceful restart recovery may be running; after
// that, one Established session is enough.
func BIRDReady(peers []birdctl.Peer, gracefulRestart bool, sinceStart, threshold time.Duration) error {
	if len(peers) == 0 {
		return nil
	}
	var down []string
	established := 0
	for _, p := range peers {
		if p.Established() {
			established++
		} else {
			down = append(down, p.PeerIP.String())
		}
	}
	if sinceStart < threshold {
		if len(down) > 0 {
			return errors.New("BGP not established with " + strings.Join(down, ","))
		}
		if gracefulRestart {
			return errors.New("graceful restart in progress")
		}
		return nil
	}
	if established > 0 {
		return nil
	}
	return errors.New("BGP not established with " + strings.Join(down, ","))
}

// PeersOfVersion keeps the sessions to peers of IP version v (4 or 6).
func PeersOfVersion(peers []birdctl.Peer, v int) []birdctl.Peer {
	var out []birdctl.Peer
	for _, p := range peers {
		if p.PeerIP.Is4() == (v == 4) && p.PeerIP != (netip.Addr{}) {
			out = append(out, p)
		}
	}
	return out
}
