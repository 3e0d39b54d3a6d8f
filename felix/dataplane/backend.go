package dataplane

import (
	"bytes"
	"context"
	"fmt"
	"strings"
)

// Backend variants for both IP versions.
var (
	BackendNFTV6    = Backend{Save: "ip6tables-nft-save", Restore: "ip6tables-nft-restore"}
	BackendLegacyV6 = Backend{Save: "ip6tables-legacy-save", Restore: "ip6tables-legacy-restore"}
)

// BackendsFor returns the v4 and v6 backends named by Calico's
// FELIX_IPTABLESBACKEND values "NFT" or "Legacy" (case-insensitive), or,
// for "Auto" or "", detects them as Calico does: whichever of
// iptables-legacy and iptables-nft already holds more rules (kube-proxy
// and the CNI usually came first), nft on a tie, and the system default
// binaries if the explicit variants are not installed.
func BackendsFor(ctx context.Context, run Runner, mode string) (v4, v6 Backend, err error) {
	switch strings.ToLower(mode) {
	case "nft":
		return BackendNFTV4, BackendNFTV6, nil
	case "legacy":
		return BackendLegacyV4, BackendLegacyV6, nil
	case "auto", "":
	default:
		return Backend{}, Backend{}, fmt.Errorf("iptables backend %q: use Auto, NFT or Legacy", mode)
	}
	count := func(bin string) (int, bool) {
		out, err := run.Run(ctx, bin, nil, nil)
		if err != nil {
			return 0, false
		}
		return bytes.Count(out, []byte("\n-A ")), true
	}
	legacy, okL := count("iptables-legacy-save")
	nft, okN := count("iptables-nft-save")
	switch {
	case !okL && !okN:
		return BackendDefaultV4, BackendDefaultV6, nil
	case okL && (!okN || legacy > nft):
		return BackendLegacyV4, BackendLegacyV6, nil
	default:
		return BackendNFTV4, BackendNFTV6, nil
	}
}
