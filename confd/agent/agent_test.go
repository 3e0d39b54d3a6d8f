package agent

import (
	"context"
	"errors"
	"flag"
	"strings"
	"sync"
	"testing"
	"time"
)

func env(m map[string]string) func(string) string { return func(k string) string { return m[k] } }

func TestHelp(t *testing.T) {
	var out strings.Builder
	err := Run(context.Background(), []string{"-h"}, env(nil), &out)
	if !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"-bird-config", "-bird-socket", "NODENAME", "DATASTORE_TYPE"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage lacks %s:\n%s", want, out.String())
		}
	}
}

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		args []string
		env  map[string]string
		want string
	}{
		{"no datastore", []string{"-config", "/nonexistent-default"}, map[string]string{"NODENAME": "n1"}, "reading config file"},
		{"datastore from env", nil, map[string]string{"NODENAME": "n1", "DATASTORE_TYPE": "etcdv3"}, "needs etcdEndpoints"},
		{"bad log level", []string{"-log-level", "loud"}, nil, "-log-level"},
		{"stray argument", []string{"extra"}, nil, "unexpected arguments"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			err := Run(context.Background(), tt.args, env(tt.env), &out)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("got %v, want an error containing %q", err, tt.want)
			}
		})
	}
}

// TestStopsOnCancel: the signal context ending (SIGTERM) stops confd
// cleanly even while the datastore is unreachable.
func TestStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	var out syncWriter
	go func() {
		done <- Run(ctx, []string{"-bird-config", t.TempDir() + "/bird.cfg"},
			env(map[string]string{"NODENAME": "n1", "DATASTORE_TYPE": "etcdv3", "ETCD_ENDPOINTS": "http://127.0.0.1:1"}), &out)
	}()
	time.Sleep(300 * time.Millisecond)
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("confd did not stop within 5s of its context ending")
	}
	if !strings.Contains(out.String(), "confd stopped") {
		t.Errorf("log:\n%s", out.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}
