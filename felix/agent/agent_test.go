package agent

import (
	"context"
	"errors"
	"path/filepath"
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
