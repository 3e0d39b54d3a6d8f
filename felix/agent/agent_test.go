package agent

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"

	felixconfig "github.com/tabbynet/tabby/felix/config"
)

// TestRunExitsOnBogusChainInsertMode: felix does not start with a value
// Calico's felix dies on, before touching the datastore or the kernel.
func TestRunExitsOnBogusChainInsertMode(t *testing.T) {
	vars := map[string]string{"NODENAME": "n", "FELIX_CHAININSERTMODE": "bogus", "FELIX_DATASTORETYPE": "etcdv3",
		"FELIX_ETCDENDPOINTS": "http://127.0.0.1:1"}
	err := Run(context.Background(), Options{Getenv: env(vars), Environ: func() []string {
		return []string{"FELIX_CHAININSERTMODE=bogus", "FELIX_DATASTORETYPE=etcdv3", "FELIX_ETCDENDPOINTS=http://127.0.0.1:1"}
	}, ConfigFile: filepath.Join(t.TempDir(), "felix.cfg")})
	if !errors.Is(err, felixconfig.ErrFatal) || !strings.Contains(err.Error(), "ChainInsertMode") || !strings.Contains(err.Error(), "bogus") {
		t.Fatalf("Run = %v, want a fatal error naming ChainInsertMode", err)
	}
}

// TestStartupGCThreshold: while felix starts, the collector runs at
// startupGCPercent unless GoGCThreshold is higher (or -1, the runtime's
// own); from the first sync on, at GoGCThreshold.
func TestStartupGCThreshold(t *testing.T) {
	orig := debug.SetGCPercent(100)
	defer debug.SetGCPercent(orig)
	log := slog.New(slog.DiscardHandler)
	for _, tc := range []struct{ configured, startup, steady int }{
		{40, startupGCPercent, 40},
		{500, 500, 500},
		{-1, 77, 77}, // left to the runtime (GOGC): untouched
	} {
		debug.SetGCPercent(77)
		steady := applyGoRuntime(config{goGC: tc.configured, goMemLimit: -1, goMaxProcs: -1}, log)
		if got := debug.SetGCPercent(-1); got != tc.startup {
			t.Errorf("GoGCThreshold %d: %d while starting, want %d", tc.configured, got, tc.startup)
		}
		debug.SetGCPercent(tc.startup)
		steady()
		if got := debug.SetGCPercent(-1); got != tc.steady {
			t.Errorf("GoGCThreshold %d: %d once in sync, want %d", tc.configured, got, tc.steady)
		}
	}
}
