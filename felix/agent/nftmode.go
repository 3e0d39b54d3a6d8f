package agent

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/tabbynet/tabby/felix/dataplane"
)

// kubeProxyRecheck is how often nftablesMode Auto looks at kube-proxy's
// mode again (Calico's 15 s); a change restarts felix, which then
// programs the other mode and removes the old one's rules.
const kubeProxyRecheck = 15 * time.Second

// chooseDataplaneMode picks iptables or nftables by nftablesMode and
// arranges the removal of the other mode's rules after the first sync (a
// live switch restarts felix: the old rules keep policing traffic until
// the new ones are in, so that a switch never leaves traffic unpoliced).
func chooseDataplaneMode(ctx context.Context, r felixRun, run dataplane.Runner, v4 dataplane.Backend, dpCfg *dataplane.Config) error {
	cfg, log := r.cfg, r.log
	detect := func() (bool, error) { return dataplane.KubeProxyNftables(cfg.netnsPath) }
	useNft, err := dataplane.NftablesEnabled(cfg.nftablesMode, detect)
	if err != nil {
		return err
	}
	if useNft {
		log.Info("dataplane: nftables", "nftablesMode", cfg.nftablesMode)
		dpCfg.NFTables = dataplane.NewNftDialer(cfg.netnsPath)
		dpCfg.RefreshInterval = cfg.nftRefresh
		// Whether the iptables mode left anything is read now, while the
		// datastore loads; the cleanup itself waits for the first sync.
		leftovers := make(chan bool, 1)
		r.bg.Go(func() { leftovers <- iptablesModeLeftovers(ctx, run) })
		dpCfg.AfterFirstSync = func(ctx context.Context) error {
			select {
			case found := <-leftovers:
				if !found {
					return nil
				}
			case <-ctx.Done():
				return ctx.Err()
			}
			return cleanupIptablesMode(ctx, run, log)
		}
	} else {
		log.Info("dataplane: iptables", "nftablesMode", cfg.nftablesMode, "save", v4.Save, "restore", v4.Restore)
		cleanupOtherBackend(ctx, run, v4, log)
		dpCfg.AfterFirstSync = func(context.Context) error {
			removed, err := dataplane.CleanupNftables(cfg.netnsPath)
			if removed {
				log.Info("removed felix's nftables tables (nftables mode is off)")
			}
			return err
		}
	}
	if equalFoldAuto(cfg.nftablesMode) {
		r.bg.Go(func() { watchKubeProxyMode(ctx, r, useNft, detect) })
	}
	return nil
}

func equalFoldAuto(mode string) bool { return mode == "" || strings.EqualFold(mode, "Auto") }

// iptablesAllBackends are the four iptables backends felix may have
// programmed.
func iptablesAllBackends() []dataplane.Backend {
	return []dataplane.Backend{dataplane.BackendNFTV4, dataplane.BackendNFTV6, dataplane.BackendLegacyV4, dataplane.BackendLegacyV6}
}

// iptablesModeLeftovers says whether the iptables mode left any of
// felix's rules or ipsets (one save per backend and one ipset listing,
// where the cleanup reads every table of every backend). Only felix
// writes them, so what is absent while it starts in nftables mode stays
// absent.
func iptablesModeLeftovers(ctx context.Context, run dataplane.Runner) bool {
	return dataplane.HasFelixRules(ctx, run, iptablesAllBackends()) || dataplane.HasFelixIPSets(ctx, run)
}

// cleanupIptablesMode removes felix's chains and hook rules from every
// iptables backend and then its ipsets.
func cleanupIptablesMode(ctx context.Context, run dataplane.Runner, log *slog.Logger) error {
	for _, b := range iptablesAllBackends() {
		chains, rules, err := dataplane.CleanupBackend(ctx, run, b)
		if err != nil {
			return err
		}
		if chains+rules > 0 {
			log.Info("removed felix's iptables rules (nftables mode is on)", "backend", b.Restore, "chains", chains, "rules", rules)
		}
	}
	n, err := dataplane.CleanupIPSets(ctx, run)
	if n > 0 {
		log.Info("removed felix's ipsets (nftables mode is on)", "sets", n)
	}
	return err
}

// watchKubeProxyMode restarts felix when kube-proxy's mode no longer
// gives the dataplane felix chose (nftablesMode Auto).
func watchKubeProxyMode(ctx context.Context, r felixRun, using bool, detect func() (bool, error)) {
	t := time.NewTicker(kubeProxyRecheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now, err := detect()
		if err != nil {
			r.log.Warn("detecting kube-proxy's nftables mode", "error", err)
			continue
		}
		if now != using {
			r.log.Warn("kube-proxy's nftables mode changed; restarting felix", "kubeProxyNftables", now)
			r.st.restart(fmt.Errorf("%w: kube-proxy's nftables mode changed (nftablesMode Auto)", ErrConfigChanged))
			return
		}
	}
}
