//go:build privileged && integration

package e2e

import (
	"context"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/invoke"
	"github.com/containernetworking/cni/pkg/version"
	"github.com/containernetworking/plugins/pkg/ns"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/tabbynet/tabby/node/kuberelay"
)

// startRelay runs calico-node's relay for node (a node namespace whose
// kubeconfig reaches the API server from inside it) on a socket of its
// own, with the kubeconfig's credentials as calico-node's, until the test
// ends; it returns once the relay's caches are synced, with its socket and
// its counts (kuberelay.Relay.Counts).
func startRelay(t testing.TB, node ns.NetNS, kubeconfig, name string) (string, func() (int64, int64)) {
	t.Helper()
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// calico-node's watches leave from the node, as the plugin's requests do.
	rc.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		var conn net.Conn
		err := node.Do(func(ns.NetNS) error {
			var err error
			conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return conn, err
	}
	socket := filepath.Join(t.TempDir(), "kube-relay.sock")
	r, err := kuberelay.New(kuberelay.Config{REST: rc, Node: name, Socket: socket, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("relay of %s: %v", name, err)
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for !r.Synced() {
		if time.Now().After(deadline) {
			t.Fatalf("relay of %s: caches not synced after 30 s", name)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return socket, r.Counts
}

// envExec runs plugins as libcni's default does, with env added to their
// environment (a node's relay socket).
type envExec struct{ env []string }

func (e envExec) exec() invoke.Exec {
	return &invoke.DefaultExec{RawExec: &invoke.RawExec{Stderr: os.Stderr}, PluginDecoder: version.PluginDecoder{}}
}

func (e envExec) ExecPlugin(ctx context.Context, path string, stdin []byte, environ []string) ([]byte, error) {
	return e.exec().ExecPlugin(ctx, path, stdin, append(environ, e.env...))
}

func (e envExec) FindInPath(plugin string, paths []string) (string, error) {
	return e.exec().FindInPath(plugin, paths)
}

func (e envExec) Decode(b []byte) (version.PluginInfo, error) { return e.exec().Decode(b) }
