package main

import (
	"io"
	"os"
	"runtime"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestReadsPodFromKubernetes: an etcd-mode ADD of a Kubernetes pod with
// policy type k8s and a kubeconfig goes to calico-k8s (it reads the pod);
// anything else stays in the lean binary.
func TestReadsPodFromKubernetes(t *testing.T) {
	const k8sConf = `{"etcd_endpoints":"http://a:1","policy":{"type":"k8s"},"kubernetes":{"kubeconfig":"/k"}}`
	const podArgs = "IgnoreUnknown=1;K8S_POD_NAMESPACE=ns;K8S_POD_NAME=web;K8S_POD_INFRA_CONTAINER_ID=x"
	tests := []struct {
		name, conf, cmd, args string
		want                  bool
	}{
		{"ADD of a pod with policy k8s and a kubeconfig", k8sConf, "ADD", podArgs, true},
		{"API root instead of a kubeconfig", `{"policy":{"type":"k8s"},"kubernetes":{"k8s_api_root":"https://x"}}`, "ADD", podArgs, true},
		{"DEL needs no pod", k8sConf, "DEL", podArgs, false},
		{"not a Kubernetes pod", k8sConf, "ADD", "IgnoreUnknown=1", false},
		{"no policy type", `{"etcd_endpoints":"http://a:1","kubernetes":{"kubeconfig":"/k"}}`, "ADD", podArgs, false},
		{"no kubeconfig", `{"etcd_endpoints":"http://a:1","policy":{"type":"k8s"}}`, "ADD", podArgs, false},
	}
	for _, tc := range tests {
		env := map[string]string{"CNI_COMMAND": tc.cmd, "CNI_ARGS": tc.args}
		if got := readsPodFromKubernetes([]byte(tc.conf), func(k string) string { return env[k] }); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
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
