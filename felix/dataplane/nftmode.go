package dataplane

import (
	"fmt"
	"strings"
)

// NftablesEnabled says whether felix runs the nftables dataplane for
// Calico's nftablesMode: Enabled yes, Disabled no, Auto (Calico's
// default) when kube-proxy runs in nftables mode on this node, which
// detectKubeProxy tells (Calico's detection: a "kube-proxy" table with
// chains in the ip or ip6 family). As in Calico, a failed detection is an
// error, not a guess.
func NftablesEnabled(mode string, detectKubeProxy func() (bool, error)) (bool, error) {
	switch strings.ToLower(mode) {
	case "enabled":
		return true, nil
	case "disabled":
		return false, nil
	case "auto", "":
		on, err := detectKubeProxy()
		if err != nil {
			return false, fmt.Errorf("detecting kube-proxy's nftables mode: %w", err)
		}
		return on, nil
	}
	return false, fmt.Errorf("nftablesMode %q: use Disabled, Enabled or Auto", mode)
}
