package main

import (
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

func TestWantsKubernetes(t *testing.T) {
	tests := []struct {
		conf string
		want bool
	}{
		{`{"datastore_type":"kubernetes"}`, true},
		{`{"datastore_type":"etcdv3","kubernetes":{"kubeconfig":"/k"}}`, false},
		{`{"kubernetes":{"kubeconfig":"/k"}}`, true},
		{`{"etcd_endpoints":"http://a:1","kubernetes":{"kubeconfig":"/k"}}`, false},
		{`{"kubernetes":{"k8s_api_root":"https://x"}}`, true},
		{`{}`, false},
		{`not json`, false},
	}
	for _, tc := range tests {
		if got := wantsKubernetes([]byte(tc.conf)); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.conf, got, tc.want)
		}
	}
}

// TestReplaceStdinSurvivesGC: after the stdin replacement, garbage
// collection must not close fd 0 (issue 19, item 8: stdin above ~16 MB
// made the collector run and skel then failed with "bad file
// descriptor").
func TestReplaceStdinSurvivesGC(t *testing.T) {
	saved, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	// No reference to the old os.Stdin here: that would keep it alive.
	t.Cleanup(func() {
		unix.Dup2(saved, 0)
		unix.Close(saved)
		os.Stdin = os.NewFile(0, "/dev/stdin")
	})
	if err := replaceStdin([]byte(`{"name":"n"}`)); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(20 * time.Millisecond) // finalizers run on their own goroutine
	}
	got, err := io.ReadAll(os.Stdin)
	if err != nil || string(got) != `{"name":"n"}` {
		t.Fatalf("reading the replaced stdin after GC: %q %v", got, err)
	}
}
